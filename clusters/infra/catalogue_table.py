"""A curated table of real EC2 instance types for local mode's fake catalogue.

vCPU, memory, architecture and GPUs are from AWS's public instance-type pages;
``od`` is the us-west-2 Linux on-demand price in USD/hour (public price list, rounded).
Spot prices are derived per zone in ``catalogue.py``.
"""

from __future__ import annotations

from typing import NamedTuple


class EC2Type(NamedTuple):
    name: str
    vcpu: int
    memory_gib: float
    arch: str  # amd64 | arm64
    od: float  # on-demand USD/hour
    gpus: int = 0
    gpu_name: str = ""
    cpu_manufacturer: str = "intel"
    hypervisor: str = "nitro"
    gpu_manufacturer: str = "nvidia"


def _family(name, arch, sizes, cpu_manufacturer="intel", hypervisor="nitro"):
    """sizes: (size, vcpu, memory GiB, on-demand price)."""
    return [EC2Type(f"{name}.{size}", vcpu, mem, arch, od, cpu_manufacturer=cpu_manufacturer,
                    hypervisor=hypervisor)
            for size, vcpu, mem, od in sizes]


TYPES: list[EC2Type] = [
    # Compute optimised, x86.
    *_family("c5", "amd64", [("large", 2, 4, 0.085), ("xlarge", 4, 8, 0.17),
                             ("2xlarge", 8, 16, 0.34), ("4xlarge", 16, 32, 0.68)]),
    *_family("c6i", "amd64", [("large", 2, 4, 0.085), ("xlarge", 4, 8, 0.17),
                              ("2xlarge", 8, 16, 0.34), ("4xlarge", 16, 32, 0.68),
                              ("8xlarge", 32, 64, 1.36)]),
    *_family("c6a", "amd64", [("large", 2, 4, 0.0765), ("xlarge", 4, 8, 0.153),
                              ("2xlarge", 8, 16, 0.306), ("4xlarge", 16, 32, 0.612)],
             cpu_manufacturer="amd"),
    *_family("c7i", "amd64", [("large", 2, 4, 0.08925), ("xlarge", 4, 8, 0.1785),
                              ("2xlarge", 8, 16, 0.357), ("4xlarge", 16, 32, 0.714)]),
    # General purpose, x86.
    *_family("m5", "amd64", [("large", 2, 8, 0.096), ("xlarge", 4, 16, 0.192),
                             ("2xlarge", 8, 32, 0.384), ("4xlarge", 16, 64, 0.768)]),
    *_family("m6i", "amd64", [("large", 2, 8, 0.096), ("xlarge", 4, 16, 0.192),
                              ("2xlarge", 8, 32, 0.384), ("4xlarge", 16, 64, 0.768),
                              ("8xlarge", 32, 128, 1.536)]),
    *_family("m6a", "amd64", [("large", 2, 8, 0.0864), ("xlarge", 4, 16, 0.1728),
                              ("2xlarge", 8, 32, 0.3456), ("4xlarge", 16, 64, 0.6912)],
             cpu_manufacturer="amd"),
    # Memory optimised, x86.
    *_family("r5", "amd64", [("large", 2, 16, 0.126), ("xlarge", 4, 32, 0.252),
                             ("2xlarge", 8, 64, 0.504), ("4xlarge", 16, 128, 1.008)]),
    *_family("r6i", "amd64", [("large", 2, 16, 0.126), ("xlarge", 4, 32, 0.252),
                              ("2xlarge", 8, 64, 0.504), ("4xlarge", 16, 128, 1.008)]),
    # Burstable: t2 is generation 2 (Xen), the one the workshop's "generation > 2" excludes.
    *_family("t2", "amd64", [("medium", 2, 4, 0.0464), ("large", 2, 8, 0.0928),
                             ("xlarge", 4, 16, 0.1856), ("2xlarge", 8, 32, 0.3712)],
             hypervisor="xen"),
    *_family("t3", "amd64", [("medium", 2, 4, 0.0416), ("large", 2, 8, 0.0832),
                             ("xlarge", 4, 16, 0.1664), ("2xlarge", 8, 32, 0.3328)]),
    *_family("t3a", "amd64", [("medium", 2, 4, 0.0376), ("large", 2, 8, 0.0752),
                              ("xlarge", 4, 16, 0.1504), ("2xlarge", 8, 32, 0.3008)],
             cpu_manufacturer="amd"),
    # Graviton (arm64).
    *_family("t4g", "arm64", [("medium", 2, 4, 0.0336), ("large", 2, 8, 0.0672),
                              ("xlarge", 4, 16, 0.1344), ("2xlarge", 8, 32, 0.2688)],
             cpu_manufacturer="aws"),
    *_family("c6g", "arm64", [("medium", 1, 2, 0.034), ("large", 2, 4, 0.068),
                              ("xlarge", 4, 8, 0.136), ("2xlarge", 8, 16, 0.272),
                              ("4xlarge", 16, 32, 0.544)], cpu_manufacturer="aws"),
    *_family("c7g", "arm64", [("medium", 1, 2, 0.0363), ("large", 2, 4, 0.0725),
                              ("xlarge", 4, 8, 0.145), ("2xlarge", 8, 16, 0.29),
                              ("4xlarge", 16, 32, 0.58)], cpu_manufacturer="aws"),
    *_family("m6g", "arm64", [("medium", 1, 4, 0.0385), ("large", 2, 8, 0.077),
                              ("xlarge", 4, 16, 0.154), ("2xlarge", 8, 32, 0.308),
                              ("4xlarge", 16, 64, 0.616)], cpu_manufacturer="aws"),
    *_family("m7g", "arm64", [("medium", 1, 4, 0.0408), ("large", 2, 8, 0.0816),
                              ("xlarge", 4, 16, 0.1632), ("2xlarge", 8, 32, 0.3264)],
             cpu_manufacturer="aws"),
    *_family("r6g", "arm64", [("medium", 1, 8, 0.0504), ("large", 2, 16, 0.1008),
                              ("xlarge", 4, 32, 0.2016), ("2xlarge", 8, 64, 0.4032)],
             cpu_manufacturer="aws"),
    # GPU (NVIDIA).
    EC2Type("g4dn.xlarge", 4, 16, "amd64", 0.526, 1, "t4"),
    EC2Type("g4dn.2xlarge", 8, 32, "amd64", 0.752, 1, "t4"),
    EC2Type("g4dn.12xlarge", 48, 192, "amd64", 3.912, 4, "t4"),
    EC2Type("g5.xlarge", 4, 16, "amd64", 1.006, 1, "a10g", "amd"),
    EC2Type("g5.2xlarge", 8, 32, "amd64", 1.212, 1, "a10g", "amd"),
    EC2Type("g5.12xlarge", 48, 192, "amd64", 5.672, 4, "a10g", "amd"),
    EC2Type("p3.2xlarge", 8, 61, "amd64", 3.06, 1, "v100"),
]

ZONES = ("us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d")
