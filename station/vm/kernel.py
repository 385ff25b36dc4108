"""The guest kernel: Debian's linux-image matching the installed headers, unpacked, made bootable
fast.

The modules are built against /usr/src/linux-headers-<release>; the kernel checks vermagic at
insmod, so the guest must run exactly that release. Only Debian's archive is used (apt-get
download).

Two flavours of the same Debian kernel version: "regular" (linux-image-<abi>-amd64, the release of
the newest installed linux-headers-*-amd64) and "rt" (linux-image-<abi>-rt-amd64, PREEMPT_RT, built
by Debian from the same source package and version), so regular and RT runs differ in the kernel
build only. The same two for arm64 (linux-image-<abi>-arm64, -rt-arm64), of the same ABI and
version again, fetched as foreign packages (station/vm/foreign.py, station/vm/cross.py).
"""

from __future__ import annotations

import lzma
import os
import re
import shutil
import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from station.vm.errors import VmError

HEADERS_ROOT = Path("/usr/src")
Log = Callable[[str], None]
FLAVOURS = ("regular", "rt")
# the guests' architectures, by Debian's names: the station's own (amd64) and arm64 (seed 004's
# board), each a kernel release suffix
ARCHES = ("amd64", "arm64")
# Debian's kernel flavours by the end of their release name (before the architecture); "regular"
# is the plain -<arch> one
_OTHER_FLAVOURS = {"rt": "rt", "cloud": "cloud"}


def release_arch(release: str) -> str | None:
    """Debian's architecture of a release: 6.1.0-56-rt-arm64 -> "arm64"; None if neither."""
    return next((arch for arch in ARCHES if release.endswith(f"-{arch}")), None)


def release_flavour(release: str) -> str | None:
    """The flavour of a release: 6.1.0-56-amd64 (or -arm64) is "regular", 6.1.0-56-rt-amd64 "rt";
    None if not a Debian amd64 or arm64 release."""
    arch = release_arch(release)
    if arch is None:
        return None
    for name, flavour in _OTHER_FLAVOURS.items():
        if release.endswith(f"-{name}-{arch}"):
            return flavour
    return "regular"


def flavour_release(release: str, flavour: str, arch: str | None = None) -> str:
    """The release of flavour (and arch: release's own by default) built from the same Debian
    kernel as release: 6.1.0-56-amd64 -> 6.1.0-56-rt-amd64, or 6.1.0-56-rt-arm64."""
    check_flavour(flavour)
    own = release_arch(release)
    if own is None or release_flavour(release) != "regular":
        raise VmError(f"{release} is not a regular Debian amd64 or arm64 kernel release")
    arch = check_arch(arch or own)
    base = release.removesuffix(f"-{own}")
    return f"{base}-{arch}" if flavour == "regular" else f"{base}-{flavour}-{arch}"


def check_flavour(flavour: str) -> None:
    if flavour not in FLAVOURS:
        raise VmError(f"unknown kernel flavour {flavour!r}: choose one of {', '.join(FLAVOURS)}")


def check_arch(arch: str) -> str:
    if arch not in ARCHES:
        raise VmError(f"unknown guest architecture {arch!r}: choose one of {', '.join(ARCHES)}")
    return arch


@dataclass(frozen=True)
class LinuxImage:
    release: str  # "6.1.0-56-amd64"
    version: str  # Debian package version, "6.1.192-2"
    root: Path  # the unpacked deb: boot/vmlinuz-<release>, lib/modules/<release>/...

    @property
    def bzimage(self) -> Path:
        return self.root / "boot" / f"vmlinuz-{self.release}"

    @property
    def modules_root(self) -> Path:
        return self.root / "lib" / "modules" / self.release


def _version_key(name: str) -> list:
    return [int(x) if x.isdigit() else x for x in re.split(r"[.-]", name)]


def headers_releases(flavour: str = "regular") -> list[str]:
    """Releases of the installed Debian amd64 headers of flavour, newest last."""
    found = [
        p.name.removeprefix("linux-headers-")
        for p in HEADERS_ROOT.glob("linux-headers-*-amd64")
        if (p / "Makefile").is_file()
    ]
    return sorted((r for r in found if release_flavour(r) == flavour), key=_version_key)


def headers_dir(release: str) -> Path:
    return HEADERS_ROOT / f"linux-headers-{release}"


def package_version(package: str) -> str | None:
    """Installed version of a Debian package, None if not installed."""
    res = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Version} ${db:Status-Status}", package],
        capture_output=True,
        text=True,
        check=False,
    )
    parts = res.stdout.split()
    return parts[0] if res.returncode == 0 and parts[-1:] == ["installed"] else None


def _apt_download(package: str, version: str, dest: Path) -> Path | None:
    """`apt-get download package=version` into dest; None if the archive no longer has it."""
    dest.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0 and _user_exists("_apt"):
        # apt drops to _apt for downloads; let it write here instead of warning about sandboxing
        shutil.chown(dest, user="_apt")
    res = subprocess.run(
        ["apt-get", "download", "-q", f"{package}={version}"], cwd=dest, capture_output=True,
        text=True, check=False
    )
    debs = sorted(dest.glob(f"{package}_*.deb"))
    return debs[-1] if res.returncode == 0 and debs else None


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _meta_headers(flavour: str) -> list[str]:
    """The metapackages that follow the archive's current kernel: the regular one, and flavour's."""
    return ["linux-headers-amd64"] + (
        [] if flavour == "regular" else [f"linux-headers-{flavour}-amd64"]
    )


def _apt(cmds: list[list[str]]) -> None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in cmds:
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if res.returncode != 0:
            raise VmError(f"{' '.join(cmd)} failed:\n{(res.stdout + res.stderr)[-2000:]}")


def _upgrade_headers(log: Log, flavour: str = "regular") -> None:
    """The archive moved on: take the current linux-headers-amd64, whose image it still carries."""
    meta = " ".join(_meta_headers(flavour))
    if os.geteuid() != 0:
        raise VmError(
            "Debian's archive no longer has the linux-image for the installed headers; as root "
            f"run: apt-get update && apt-get install {meta}  (headers and image must match: "
            "vermagic)"
        )
    log(f"vm: archive moved on; upgrading {meta} so headers and image match")
    _apt([["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", *_meta_headers(flavour)]])


def ensure_headers(release: str, version: str, log: Log) -> Path:
    """/usr/src/linux-headers-<release> at exactly version (the image's), installed with apt-get
    when root.

    The regular headers are there by construction (their release picks the image); the RT headers of
    the same Debian version are installed here, or the VmError says exactly what to install.
    """
    pkg = f"linux-headers-{release}"
    kdir = headers_dir(release)
    installed = package_version(pkg)
    if installed == version and (kdir / "Makefile").is_file():
        return kdir
    want = f"{pkg}={version}"
    have = f"{pkg} {installed} is installed" if installed else f"{pkg} is not installed"
    if os.geteuid() != 0:
        raise VmError(
            f"the modules for linux-image-{release} {version} need its headers ({have}); "
            f"as root run: apt-get install --no-install-recommends {want}"
        )
    log(f"vm: apt-get install {want}")
    install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", want]
    try:
        _apt([install])
    except VmError:
        try:
            # the package lists may predate the version
            _apt([["apt-get", "update", "-q"], install])
        except VmError as exc:
            raise VmError(f"cannot install {want} (needed to build the modules for {release}): "
                          f"{exc}") from None
    if package_version(pkg) != version or not (kdir / "Makefile").is_file():
        raise VmError(
            f"apt-get install {want} finished but {kdir} is not there: install it by hand"
        )
    return kdir


def download_linux_image(debs_dir: Path, log: Log, flavour: str = "regular") -> tuple[str, str,
                                                                                      Path]:
    """(release, version, deb) of the linux-image of flavour matching the newest installed regular
    headers.

    For "rt" that is linux-image-<abi>-rt-amd64 of the same Debian version as
    linux-headers-<abi>-amd64.
    """
    check_flavour(flavour)
    for attempt in (1, 2):
        releases = headers_releases("regular")
        if not releases:
            raise VmError("no /usr/src/linux-headers-*-amd64: install linux-headers-amd64")
        version = package_version(f"linux-headers-{releases[-1]}")
        if version is None:
            raise VmError(f"linux-headers-{releases[-1]} is in /usr/src but dpkg does not list it "
                          "as installed")
        release = flavour_release(releases[-1], flavour)
        cached = debs_dir / f"linux-image-{release}_{version}_amd64.deb"
        if cached.is_file():
            return release, version, cached
        log(f"vm: apt-get download linux-image-{release}={version}")
        for pkg in (f"linux-image-{release}", f"linux-image-{release}-unsigned"):
            deb = _apt_download(pkg, version, debs_dir)
            if deb is not None:
                deb.rename(cached)
                return release, version, cached
        if attempt == 1:
            _upgrade_headers(log, flavour)
    raise VmError(f"apt-get download linux-image-{release}={version} failed even after upgrading "
                  "the headers")


def unpack(deb: Path, release: str, version: str, root: Path) -> LinuxImage:
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    image = LinuxImage(release, version, root)
    if not image.bzimage.is_file():
        raise VmError(f"{deb.name} has no boot/vmlinuz-{release}")
    # the deb leaves modules.dep to its postinst; generate it for the staged tree only
    subprocess.run(["depmod", "-b", str(root), release], check=True, capture_output=True)
    return image


# Magic numbers of the compressors Kconfig offers for the kernel payload, tried in this order.
_PAYLOAD_MAGIC = {
    b"\xfd7zXZ\x00": "xz",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"\x1f\x8b\x08": "gzip",
}


def extract_vmlinux(bzimage: Path, out: Path) -> str:
    """Write the ELF vmlinux inside a bzImage to out; returns the compressor's name.

    QEMU boots an ELF vmlinux through its PVH note: no decompression in the guest, which under TCG
    costs seconds. The payload's place is in the setup header (boot protocol >= 2.08).
    """
    data = bzimage.read_bytes()
    if data[0x202:0x206] != b"HdrS" or struct.unpack_from("<H", data, 0x206)[0] < 0x208:
        raise VmError(f"{bzimage} is not a bzImage with boot protocol >= 2.08")
    setup_sects = data[0x1F1] or 4
    offset, length = struct.unpack_from("<II", data, 0x248)
    payload = data[(setup_sects + 1) * 512 + offset :][:length]
    kind = next((k for magic, k in _PAYLOAD_MAGIC.items() if payload.startswith(magic)), None)
    if kind == "xz":
        elf = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(payload)
    elif kind in ("zstd", "gzip"):
        # payload_length covers the 4-byte size the kernel build appends; zstd rejects it as a bad
        # frame
        res = subprocess.run([kind, "-dc"], input=payload[:-4], capture_output=True, check=False)
        if not res.stdout:
            raise VmError(f"{kind} -dc could not unpack the kernel: "
                          f"{res.stderr.decode(errors='replace')}")
        elf = res.stdout
    else:
        raise VmError(f"unknown kernel compression (payload starts {payload[:6].hex()})")
    if not elf.startswith(b"\x7fELF"):
        raise VmError(f"decompressed {kind} payload of {bzimage} is not an ELF file")
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(elf)
    tmp.replace(out)
    return kind
