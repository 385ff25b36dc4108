"""Another architecture's guest programs (arm64): Debian's packages of busybox, dropbear and the
load and probe tools, with every library they need, unpacked into one sysroot the initramfs takes
its files from (station/vm/initramfs.py), and the guest's kernel package. All from Debian's
archive as foreign packages (station/vm/foreign.py): nothing is installed on the host.

Which libraries: apt resolves the tools' dependencies as for a fresh system of that architecture
(ForeignArchive.closure); only the library packages among them are fetched (lib*, zlib1g: not
perl, python or dpkg, which some tools' packages depend on for scripts the guest never runs), and
the initramfs copies only what the binaries' dynamic sections name.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

from station.vm.errors import VmError
from station.vm.foreign import ForeignArchive

Log = Callable[[str], None]
# the packages of initramfs.BUSYBOX, DROPBEAR, SFTP_SERVER and GUEST_TOOLS (those built for the
# architecture: initramfs.guest_tools)
BASE_PACKAGES = ("busybox-static", "dropbear-bin", "openssh-sftp-server", "libc6")
RECORD = ".irq-station-packages.json"


def _is_library(package: str) -> bool:
    return package.startswith("lib") or package == "zlib1g"


def guest_sysroot(archive: ForeignArchive, tools: dict[str, str], root: Path,
                  log: Log = print) -> tuple[Path, dict[str, str]]:
    """(the sysroot, package -> version of what is in it): the guest's programs of `tools` (path
    -> package) and BASE_PACKAGES, with their libraries; unpacked again only when a version
    changed."""
    with archive.locked():
        return _guest_sysroot(archive, tools, root, log)


def _guest_sysroot(archive: ForeignArchive, tools: dict[str, str], root: Path,
                   log: Log) -> tuple[Path, dict[str, str]]:
    archive.update(log)
    wanted = sorted({*BASE_PACKAGES, *tools.values()})
    closure = archive.closure(wanted)
    packages = {p: v for p, v in sorted(closure.items()) if p in wanted or _is_library(p)}
    missing = [p for p in wanted if p not in packages]
    if missing:
        raise VmError(f"Debian's archive has no {archive.arch} build of {', '.join(missing)}")
    record = root / RECORD
    try:
        if json.loads(record.read_text()) == packages:
            return root, packages
    except (OSError, ValueError):
        pass
    if root.exists():
        shutil.rmtree(root)
    for deb in archive.download_all(packages, log).values():
        archive.unpack(deb, root)
    record.write_text(json.dumps(packages, indent=1, sort_keys=True))
    return root, packages


def download_linux_image(archive: ForeignArchive, release: str, version: str,
                         log: Log = print) -> Path:
    """Debian's linux-image of `release` at `version` (the signed package, else the unsigned
    one)."""
    with archive.locked():
        archive.update(log)
        for package in (f"linux-image-{release}", f"linux-image-{release}-unsigned"):
            if version in archive.versions(package):
                return archive.download(package, version, log)
    raise VmError(f"Debian's archive has no linux-image-{release}={version} for {archive.arch} "
                  f"(nor -unsigned): the archive moved on; upgrade linux-headers-amd64 so that "
                  "every guest kernel is of its version")
