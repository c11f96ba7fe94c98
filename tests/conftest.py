"""Fixtures the harness's own tests share."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture(scope="session", autouse=True)
def _go_caches_outside_home():
    """pytester moves HOME into each test's tmp dir, and Go's caches follow HOME: a child
    run that reads a Karpenter module would download it (350 MB, 100k files) into the tmp
    dir, and a later pytest's numbered-dir cleanup would spend seconds deleting it (seen:
    Ctrl-C of an xdist run taking 24 s). The machine's own caches stay in force instead."""
    if not shutil.which("go"):
        yield
        return
    import subprocess
    names = ("GOPATH", "GOMODCACHE", "GOCACHE")
    values = subprocess.run(["go", "env", *names], capture_output=True, text=True,
                            check=True).stdout.splitlines()
    with pytest.MonkeyPatch.context() as mp:
        for name, value in zip(names, values, strict=True):
            mp.setenv(name, value)
        yield


@pytest.fixture(scope="session")
def provider_module() -> Path:
    """The pinned Karpenter AWS provider module in the Go module cache (downloaded from the
    module proxy the first time; never from the open internet)."""
    from karpenter_e2e.clusters.eks import provider
    if not shutil.which("go"):
        pytest.skip("Go is not on PATH: the AWS provider's CRDs and sources are read from the "
                    f"Go module cache ({provider.MODULE}, go mod download)")
    return provider.module_dir()


def module_in_cache(module: str, version: str) -> Path:
    """A module from the Go module cache only (a build put it there): no download, no
    network; the test is skipped when it is not there yet."""
    import subprocess
    if not shutil.which("go"):
        pytest.skip("no Go on PATH, so no module cache")
    modcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True,
                              text=True).stdout.strip()
    path = Path(modcache) / f"{module}@{version}"
    if not path.is_dir():
        pytest.skip(f"{module} {version} is not in the Go module cache yet")
    return path


@pytest.fixture(scope="session")
def go_module():
    """``go_module(module, version)``: the module's directory in the Go module cache."""
    return module_in_cache


@pytest.fixture
def fake_aws(monkeypatch):
    """moto's in-process AWS for the test's boto3 clients (dummy credentials, no network)."""
    from moto import mock_aws
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        yield


@pytest.fixture(scope="session")
def bare_apiserver(tmp_path_factory):
    """A kube-apiserver on its own etcd (local mode's cached binaries, no controllers, no
    kwok, no Karpenter): enough to install CRDs and dry-run objects against their schema and
    CEL rules, in a few seconds. Yields a kubectl runner bound to its kubeconfig."""
    import subprocess

    from karpenter_e2e.clusters.api.waits import Observation, eventually
    from karpenter_e2e.clusters.infra import build, process

    work = tmp_path_factory.mktemp("apiserver")
    binaries = {n: build.build(build.find(n)) for n in ("etcd", "kube-apiserver", "kubectl")}
    key = work / "sa.key"
    subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True,
                   capture_output=True)
    token = "karpenter-e2e-test-token"
    (work / "tokens.csv").write_text(f"{token},admin,admin,system:masters\n")
    client, peer, secure = process.free_port(), process.free_port(), process.free_port()
    procs = []

    def die_with_pytest() -> None:
        # A pytest killed by a timeout runs no teardown: the kernel stops these with it
        # (seen: bare apiservers of killed runs left running for an hour).
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG

    def spawn(name: str, args: list[str]) -> None:
        with open(work / f"{name}.log", "w") as out:
            procs.append(subprocess.Popen([str(binaries[name]), *args], stdout=out,
                                          stderr=subprocess.STDOUT, cwd=work,
                                          start_new_session=True, preexec_fn=die_with_pytest))

    try:
        spawn("etcd", ["--name=default", f"--data-dir={work / 'etcd'}",
                       f"--listen-client-urls=http://127.0.0.1:{client}",
                       f"--advertise-client-urls=http://127.0.0.1:{client}",
                       f"--listen-peer-urls=http://127.0.0.1:{peer}",
                       f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                       f"--initial-cluster=default=http://127.0.0.1:{peer}"])
        spawn("kube-apiserver", [f"--etcd-servers=http://127.0.0.1:{client}",
                                 "--bind-address=127.0.0.1", f"--secure-port={secure}",
                                 f"--cert-dir={work / 'certs'}",
                                 f"--token-auth-file={work / 'tokens.csv'}",
                                 "--authorization-mode=AlwaysAllow",
                                 "--service-cluster-ip-range=10.0.0.0/24",
                                 "--service-account-issuer=https://kubernetes.default.svc",
                                 f"--service-account-key-file={key}",
                                 f"--service-account-signing-key-file={key}"])
        kubeconfig = work / "kubeconfig"
        kubeconfig.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: bare\n"
            f"clusters: [{{name: bare, cluster: {{server: 'https://127.0.0.1:{secure}', "
            "insecure-skip-tls-verify: true}}]\n"
            f"users: [{{name: admin, user: {{token: {token}}}}}]\n"
            "contexts: [{name: bare, context: {cluster: bare, user: admin}}]\n")

        def kubectl(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
            return subprocess.run([str(binaries["kubectl"]), f"--kubeconfig={kubeconfig}", *args],
                                  input=stdin, capture_output=True, text=True, timeout=60)

        def ready() -> Observation:
            out = kubectl("get", "--raw", "/readyz")
            return Observation(out.stdout.strip() == "ok", (out.stdout or out.stderr).strip()[-300:])

        eventually(ready, what="a bare kube-apiserver's /readyz to answer ok", timeout=60,
                   poll=0.5, diagnose=lambda: (work / "kube-apiserver.log").read_text()[-2000:])
        yield kubectl
    finally:
        for proc in reversed(procs):
            process.terminate(proc.pid)


def pytest_sessionfinish(session, exitstatus):
    """The clusters this session's tests brought up (named ``...-<pid>``) are down by now; a
    green session also removes the logs ``down`` keeps for them, so hundreds of test runs
    leave nothing in the cache. A red one keeps them: they are what shows why."""
    import os

    from karpenter_e2e.clusters.infra import cluster_files
    if exitstatus != 0:
        return
    suffix = f"-{os.getpid()}"
    names = {p.name.partition(suffix)[0] + suffix
             for p in cluster_files.root().glob(f"*{suffix}*")}
    for name in names:
        shutil.rmtree(cluster_files.directory(name), ignore_errors=True)
        for side in cluster_files.side_files(name):
            side.unlink(missing_ok=True)
