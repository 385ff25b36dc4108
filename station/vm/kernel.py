"""The guest kernel: Debian's linux-image matching the installed headers, unpacked, made bootable fast.

The modules are built against /usr/src/linux-headers-<release>; the kernel checks vermagic at insmod, so
the guest must run exactly that release. Only Debian's archive is used (apt-get download).
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


def headers_releases() -> list[str]:
    """Releases of the installed Debian amd64 headers, newest last."""
    found = [
        p.name.removeprefix("linux-headers-")
        for p in HEADERS_ROOT.glob("linux-headers-*-amd64")
        if (p / "Makefile").is_file()
    ]
    return sorted(found, key=_version_key)


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
        ["apt-get", "download", "-q", f"{package}={version}"], cwd=dest, capture_output=True, text=True, check=False
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


def _upgrade_headers(log: Log) -> None:
    """The archive moved on: take the current linux-headers-amd64, whose image it still carries."""
    if os.geteuid() != 0:
        raise VmError(
            "Debian's archive no longer has the linux-image for the installed headers; as root run: "
            "apt-get update && apt-get install linux-headers-amd64  (headers and image must match: vermagic)"
        )
    log("vm: archive moved on; upgrading linux-headers-amd64 so headers and image match")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "linux-headers-amd64"]):
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if res.returncode != 0:
            raise VmError(f"{' '.join(cmd)} failed:\n{(res.stdout + res.stderr)[-2000:]}")


def download_linux_image(debs_dir: Path, log: Log) -> tuple[str, str, Path]:
    """(release, version, deb) of the linux-image matching the newest installed headers."""
    for attempt in (1, 2):
        releases = headers_releases()
        if not releases:
            raise VmError("no /usr/src/linux-headers-*-amd64: install linux-headers-amd64")
        release = releases[-1]
        version = package_version(f"linux-headers-{release}")
        if version is None:
            raise VmError(f"linux-headers-{release} is in /usr/src but dpkg does not list it as installed")
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
            _upgrade_headers(log)
    raise VmError(f"apt-get download linux-image-{release}={version} failed even after upgrading the headers")


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
        # payload_length covers the 4-byte size the kernel build appends; zstd rejects it as a bad frame
        res = subprocess.run([kind, "-dc"], input=payload[:-4], capture_output=True, check=False)
        if not res.stdout:
            raise VmError(f"{kind} -dc could not unpack the kernel: {res.stderr.decode(errors='replace')}")
        elf = res.stdout
    else:
        raise VmError(f"unknown kernel compression (payload starts {payload[:6].hex()})")
    if not elf.startswith(b"\x7fELF"):
        raise VmError(f"decompressed {kind} payload of {bzimage} is not an ELF file")
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(elf)
    tmp.replace(out)
    return kind
