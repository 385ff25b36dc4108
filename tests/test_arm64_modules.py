"""The mainline modules cross-built for arm64 against Debian's own arm64 headers (fetched as foreign
packages, nothing installed: station/vm/foreign.py, station/vm/cross.py), W=1 warning-free, for
both kernel flavours; and a build for the other flavour refused before upload, naming both kernels.

Truth: the ELF header of every built file (machine AArch64) and Debian's package of the headers
(the release its vermagic must name); that the guest's kernel loads them is tests/test_vm_arm64.py's.
Needs the cross-compiler (gcc-aarch64-linux-gnu: target_modules/scripts/ci-deps.sh) and Debian's
archive; without them this skips, except in CI.
"""

from __future__ import annotations

import re
import shutil
import struct
from pathlib import Path

import pytest

from station.target.module_build import ModuleBuildError, build_for
from station.vm import cross, kernel, latency_modules
from station.vm.errors import VmError
from station.vm.foreign import ForeignArchive
from tests.conftest import missing as _missing

EM_AARCH64 = 183  # the ELF machine number of AArch64 (elf.h)


def _elf_machine(ko: Path) -> int:
    data = ko.read_bytes()[:20]
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{ko}: not a 64-bit LE ELF"
    return struct.unpack_from("<H", data, 18)[0]


@pytest.fixture(scope="module")
def arm64_trees() -> dict[str, tuple[str, Path]]:
    if shutil.which("aarch64-linux-gnu-gcc") is None:
        _missing("no aarch64-linux-gnu-gcc: apt-get install gcc-aarch64-linux-gnu "
                 "(target_modules/scripts/ci-deps.sh)")
    try:
        return {flavour: cross.guest_headers("arm64", flavour) for flavour in kernel.FLAVOURS}
    except VmError as exc:
        _missing(f"Debian's arm64 headers not fetched: {exc}")
        raise


@pytest.fixture(scope="module")
def builds(arm64_trees, tmp_path_factory):
    root = tmp_path_factory.mktemp("arm64-modules")
    return {flavour: build_for(release, kdir, cross.cross_compile("arm64"), root=root)
            for flavour, (release, kdir) in arm64_trees.items()}


@pytest.mark.parametrize("flavour", kernel.FLAVOURS)
def test_cross_built_for_arm64_without_warnings(builds, arm64_trees, flavour):
    release, kdir = arm64_trees[flavour]
    assert kernel.release_arch(release) == "arm64" and kernel.release_flavour(release) == flavour
    build = builds[flavour]
    out = Path(build.out_dir)
    log = (out / latency_modules.BUILD_LOG).read_text()
    bad = [ln for ln in log.splitlines() if re.search(r"warning|error", ln, re.I)]
    assert bad == [], "the W=1 cross build printed:\n" + "\n".join(bad)
    assert sorted(build.built_for) == sorted(latency_modules.MODULES)
    for name, magic in build.built_for.items():
        assert _elf_machine(out / name) == EM_AARCH64, name
        words = magic.split()
        # the release Debian's package of these headers is for, and the arm64 kernel's word
        assert words[0] == release == kdir.name.removeprefix("linux-headers-"), (name, magic)
        assert "aarch64" in words and ("preempt_rt" in words) == (flavour == "rt"), (name, magic)


def test_the_other_flavour_is_refused_naming_both(arm64_trees, tmp_path):
    regular, _ = arm64_trees["regular"]
    rt, rt_kdir = arm64_trees["rt"]
    with pytest.raises(ModuleBuildError) as caught:
        build_for(regular, rt_kdir, cross.cross_compile("arm64"), root=tmp_path)
    said = str(caught.value)
    assert f"are for kernel {rt}" in said and f"the target runs {regular}" in said, said
    assert "refused before upload" in said


def test_foreign_archive_refuses_garbage_names(tmp_path):
    archive = ForeignArchive(tmp_path, "arm64")
    for bad in ("linux-image; rm -rf /", "Linux", "-o", "a b", ""):
        with pytest.raises(VmError):
            archive.version(bad)
    with pytest.raises(VmError):
        ForeignArchive(tmp_path, "sparc")
    with pytest.raises(VmError):
        archive.download("busybox-static", "1.0; reboot")


def test_arch_releases():
    assert kernel.flavour_release("6.1.0-57-amd64", "rt", "arm64") == "6.1.0-57-rt-arm64"
    assert kernel.flavour_release("6.1.0-57-amd64", "regular", "arm64") == "6.1.0-57-arm64"
    assert kernel.flavour_release("6.1.0-57-arm64", "rt") == "6.1.0-57-rt-arm64"
    assert kernel.release_arch("6.1.0-57-rt-arm64") == "arm64"
    assert kernel.release_flavour("6.1.0-57-rt-arm64") == "rt"
    assert kernel.release_arch("6.1.0-rpi7-rpi-v8") is None
    with pytest.raises(VmError):
        kernel.flavour_release("6.1.0-57-amd64", "rt", "riscv64")
