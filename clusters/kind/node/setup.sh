#!/bin/bash
# The RUN steps of kind's base image (images/base/Dockerfile of the pinned kind), run in the
# build container over a Debian rootfs that already holds kind's files and the packages. What
# kind builds from source there (containerd, runc, CNI plugins) comes from Debian's packages;
# crictl is built from sigs.k8s.io/cri-tools and copied in before this runs.
set -euo pipefail

echo "kind base: removing unwanted systemd services"
find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
rm -f /lib/systemd/system/multi-user.target.wants/*
rm -f /etc/systemd/system/*.wants/*
rm -f /lib/systemd/system/local-fs.target.wants/*
rm -f /lib/systemd/system/sockets.target.wants/*udev*
rm -f /lib/systemd/system/sockets.target.wants/*initctl*
rm -f /lib/systemd/system/basic.target.wants/*
echo "ReadKMsg=no" >> /etc/systemd/journald.conf
[ -e /sbin/init ] || ln -s /usr/lib/systemd/systemd /sbin/init

echo "kind base: enabling / disabling services"
systemctl enable kubelet.service
systemctl enable containerd.service
systemctl enable undo-mount-hacks.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests

# kind's containerd.service and CNI config expect its own install paths.
for bin in containerd ctr containerd-shim-runc-v2; do
  ln -sf "/usr/bin/$bin" "/usr/local/bin/$bin"
done
mkdir -p /opt/cni/bin
for plugin in host-local loopback ptp portmap; do
  cp "/usr/lib/cni/$plugin" /opt/cni/bin/
done

# the base runtime spec, as kind makes it: a createContainer hook and no rlimits
ctr oci spec \
  | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
  | jq 'del(.process.rlimits)' \
  > /etc/containerd/cri-base.json

# Only where the build machine's bounding set lacks a capability: runc is reached through
# capwrap, which drops what is missing (and a negative oomScoreAdj, which needs
# CAP_SYS_RESOURCE) from each container's spec.
if [ -x /usr/local/bin/capwrap ]; then
  sed -i 's#^\(\s*\)SystemdCgroup = true#&\n\1BinaryName = "/usr/local/bin/capwrap"#' \
    /etc/containerd/config.toml
  grep -q 'BinaryName = "/usr/local/bin/capwrap"' /etc/containerd/config.toml
fi

containerd --version
runc --version | head -1
crictl --version
