"""The Debian packages the host needs to build and boot the VM, installed on demand."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from station.vm.errors import VmError

# installs HOST_PACKAGES; shipped beside this module
CI_DEPS = Path(__file__).with_name("ci-deps.sh")

# package -> why; the image is assembled from these and from the downloaded linux-image deb only.
HOST_PACKAGES: dict[str, str] = {
    "qemu-system-x86": "runs the VM",
    "linux-headers-amd64": "the kernel the modules are built for (its release picks the "
                           "linux-image)",
    "linux-headers-rt-amd64": 'the PREEMPT_RT kernel the modules are built for (kernel="rt")',
    "busybox-static": "the guest's shell and tools",
    "dropbear-bin": "the guest's SSH server and host key generator",
    "openssh-sftp-server": "lets SFTP clients copy files into the guest",
    "kmod": "depmod: the dependencies of the guest's NIC driver",
    "xz-utils": "decompresses the kernel and modules",
    "zstd": "decompresses a zstd-compressed kernel",
    "gcc": "builds the latency modules",
    "make": "builds the latency modules",
    "rt-tests": "cyclictest and hackbench in the guest",
    "stressapptest": "a memory, disk and network load in the guest",
    "stress-ng": "CPU and other loads in the guest",
    "procps": "pgrep and pkill in the guest (busybox-static has neither)",
    "rtla": "rtla osnoise/hwnoise in the guest, beside the interruption detector (the RT kernel "
            "has the tracers)",
}
# packages needed only by one kernel flavour (build_image(kernel=...)); the others every flavour
# needs
FLAVOUR_PACKAGES: dict[str, str] = {"linux-headers-rt-amd64": "rt"}
# what an arm64 guest needs on this host besides (build_image(arch="arm64")): the guest's own
# packages are arm64 ones, fetched into a cache (station/vm/guest_root.py), never installed
ARCH_PACKAGES: dict[str, dict[str, str]] = {
    "arm64": {
        "qemu-system-arm": "runs the arm64 VM (qemu-system-aarch64)",
        "gcc-aarch64-linux-gnu": "cross-builds the latency modules for Debian's arm64 kernel (the "
                                 "gcc it was built with)",
        "libc6-dev-arm64-cross": "links the guest's static tools (the interruption detector)",
    },
}
# the amd64 guest's own programs: taken from this host's packages, which an arm64 guest does not
# use
_AMD64_GUEST = ("qemu-system-x86", "busybox-static", "dropbear-bin", "openssh-sftp-server",
                "rt-tests", "stressapptest", "stress-ng", "procps", "rtla")


def host_packages(kernel: str | None = None, arch: str | None = None) -> dict[str, str]:
    """HOST_PACKAGES a build of that kernel flavour and architecture needs (for None: every
    flavour's, the amd64 guest's)."""
    if arch not in (None, "amd64"):
        base = {p: why for p, why in HOST_PACKAGES.items()
                if p not in _AMD64_GUEST and FLAVOUR_PACKAGES.get(p) is None}
        # the arm64 headers build with the host's common headers of the flavour (rt: -common-rt,
        # which linux-headers-rt-amd64 brings)
        if kernel == "rt":
            base["linux-headers-rt-amd64"] = HOST_PACKAGES["linux-headers-rt-amd64"]
        return {**base, **ARCH_PACKAGES[arch]}
    return {
        p: why
        for p, why in HOST_PACKAGES.items()
        if kernel is None or FLAVOUR_PACKAGES.get(p, kernel) == kernel
    }


def missing_host_packages(packages: dict[str, str] | None = None) -> list[str]:
    """Packages of HOST_PACKAGES that dpkg does not report as installed."""
    wanted = list(packages or HOST_PACKAGES)
    res = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Status}\n", *wanted],
        capture_output=True,
        text=True,
        check=False,
    )
    installed = {ln.split()[0] for ln in res.stdout.splitlines() if ln.endswith(" installed")}
    return [p for p in wanted if p not in installed]


def ensure_host_packages(log: Callable[[str], None] = print, kernel: str | None = None,
                         arch: str | None = None) -> None:
    """Install what a build of kernel (None: any flavour) and arch lacks with apt-get (as root);
    else say what to install."""
    wanted = host_packages(kernel, arch)
    missing = missing_host_packages(wanted)
    if not missing:
        return
    if os.geteuid() != 0:
        why = "; ".join(f"{p}: {wanted[p]}" for p in missing)
        raise VmError(
            f"missing host packages ({why}). Install them as root: apt-get install "
            f"--no-install-recommends {' '.join(missing)}  (or, as root: sh {CI_DEPS})"
        )
    log(f"vm: installing {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (
        ["apt-get", "update", "-q"],
        ["apt-get", "install", "-y", "-q", "--no-install-recommends", *missing],
    ):
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if res.returncode != 0:
            raise VmError(f"{' '.join(cmd)} failed:\n{(res.stdout + res.stderr)[-2000:]}")
    still = missing_host_packages(wanted)
    if still:
        raise VmError(f"apt-get install finished but {' '.join(still)} are still not installed")
