"""A kernel build tree for another architecture on this station: Debian's arm64 headers of the
very kernel version whose amd64 headers are installed, so that modules cross-built against them
load in Debian's arm64 kernel (vermagic and symbol versions match).

Debian splits a kernel's headers three ways: linux-headers-<abi>-<flavour><arch> (the .config,
Module.symvers and generated headers of one build), linux-headers-<abi>-common[-rt] (the sources'
headers and Makefiles of every architecture, arch "all": the host has them already, with its amd64
headers) and linux-kbuild-<ver> (fixdep, modpost and the other tools kbuild runs: host programs).
So only the first is fetched for arm64 (station/vm/foreign.py) and unpacked into a sysroot; its
Makefile includes the host's common tree by its absolute path, and its scripts/ and tools/ links
are pointed at the host's own kbuild. The build then needs the cross-compiler Debian's kernel was
built with (gcc-12 for aarch64: gcc-aarch64-linux-gnu) and ARCH=arm64
CROSS_COMPILE=aarch64-linux-gnu- (station/target/module_build.py make_args).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from station.vm import kernel as kernel_mod
from station.vm.errors import VmError
from station.vm.foreign import ForeignArchive

Log = Callable[[str], None]
# Debian's architecture -> the GNU triplet of its cross-compiler (make's CROSS_COMPILE, less the -)
GNU_TRIPLET = {"arm64": "aarch64-linux-gnu", "amd64": "x86_64-linux-gnu"}
KERNEL_ARCH = {"arm64": "arm64", "amd64": "x86"}  # Debian's architecture -> the kernel's ARCH


def cross_compile(arch: str) -> str:
    """make's CROSS_COMPILE for arch: "aarch64-linux-gnu-"."""
    return GNU_TRIPLET[kernel_mod.check_arch(arch)] + "-"


def make_args(arch: str) -> tuple[str, ...]:
    """make's variables that build the modules for an arch guest on this (amd64) station (a
    campaign's module.cross_compile gets the same from station/target/module_build.py)."""
    if kernel_mod.check_arch(arch) == "amd64":
        return ()
    return f"ARCH={KERNEL_ARCH[arch]}", f"CROSS_COMPILE={cross_compile(arch)}"


def host_release() -> tuple[str, str]:
    """(release, Debian version) of the newest installed regular amd64 headers: every guest kernel,
    of either architecture and flavour, is this version."""
    releases = kernel_mod.headers_releases("regular")
    if not releases:
        raise VmError("no /usr/src/linux-headers-*-amd64: install linux-headers-amd64")
    version = kernel_mod.package_version(f"linux-headers-{releases[-1]}")
    if version is None:
        raise VmError(f"linux-headers-{releases[-1]} is in /usr/src but dpkg does not list it as "
                      "installed")
    return releases[-1], version


def kbuild_version(kdir: Path) -> str:
    """"6.1" from a Debian headers tree's scripts link (../../lib/linux-kbuild-6.1/scripts)."""
    target = (kdir / "scripts").readlink() if (kdir / "scripts").is_symlink() else None
    m = re.search(r"linux-kbuild-([0-9.]+)", str(target or ""))
    if m is None:
        raise VmError(f"{kdir}/scripts is not a link into a linux-kbuild tree ({target})")
    return m.group(1)


def common_tree(kdir: Path) -> Path:
    """The common headers tree a Debian headers tree's Makefile includes (an absolute path)."""
    text = (kdir / "Makefile").read_text()
    m = re.search(r"^include (/\S+)/Makefile$", text, re.M)
    if m is None:
        raise VmError(f"{kdir}/Makefile does not include a common headers tree:\n{text[:300]}")
    return Path(m.group(1))


def foreign_headers(archive: ForeignArchive, release: str, version: str, sysroot: Path,
                    log: Log = print) -> Path:
    """The build tree of `release` (an arm64 release, say) at `version`, unpacked under sysroot
    and wired to this host's common headers and kbuild tools: a KDIR for make."""
    arch = kernel_mod.release_arch(release)
    if arch != archive.arch:
        raise VmError(f"{release} is not a {archive.arch} kernel release")
    kdir = sysroot / "usr" / "src" / f"linux-headers-{release}"
    stamp = kdir / ".irq-station-version"
    with archive.locked():
        if not (stamp.is_file() and stamp.read_text() == version and (kdir / "Makefile").is_file()):
            archive.update(log)
            deb = archive.download(f"linux-headers-{release}", version, log)
            archive.unpack(deb, sysroot)
            stamp.write_text(version)
    # what the tree borrows from the host must be of the same version: the common headers (its
    # Makefile's include) and kbuild's tools (modpost reads Module.symvers' format)
    common = common_tree(kdir)
    kbuild = f"linux-kbuild-{kbuild_version(kdir)}"
    for package, path in ((common.name, common), (kbuild, Path("/usr/lib") / kbuild)):
        have = kernel_mod.package_version(package)
        if have != version or not path.is_dir():
            state = f"{package} {have} is installed" if have else f"{package} is not installed"
            raise VmError(f"the {arch} headers of {release} {version} build with this host's "
                          f"{package} of the same version ({state}): as root run apt-get install "
                          f"--no-install-recommends {package}={version}")
    # scripts/ and tools/ are links to ../../lib/linux-kbuild-<ver>/…: inside the sysroot, so
    # the sysroot's usr/lib/linux-kbuild-<ver> is a link to the host's
    link = sysroot / "usr" / "lib" / kbuild
    with archive.locked():
        if not link.is_symlink() or link.readlink() != Path("/usr/lib") / kbuild:
            link.parent.mkdir(parents=True, exist_ok=True)
            link.unlink(missing_ok=True)
            link.symlink_to(Path("/usr/lib") / kbuild)
    return kdir


def guest_headers(arch: str, flavour: str = "regular", vm_dir: Path | None = None,
                  log: Log = print) -> tuple[str, Path]:
    """(release, KDIR) of the `arch` guest kernel of `flavour`: the same Debian version as this
    host's regular amd64 headers; for amd64 the installed headers themselves."""
    from station.vm.paths import foreign_dir

    host, version = host_release()
    release = kernel_mod.flavour_release(host, flavour, arch)
    if arch == "amd64":
        return release, kernel_mod.ensure_headers(release, version, log)
    root = foreign_dir(arch, vm_dir)
    return release, foreign_headers(ForeignArchive(root, arch), release, version,
                                    root / "headers", log)
