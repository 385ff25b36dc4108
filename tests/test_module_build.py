"""Modules built for the target's kernel (issue 49): a real `make` against Debian's headers on this
machine (the VM kernels' headers, which scripts/test.sh installs), each file's vermagic read back
from what make wrote; the VM tests build for both guest kernels (tests/test_vm_rt.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from station.common.module_names import vermagic
from station.config import ConfigError, load_campaign
from station.target.module_build import ModuleBuildError, build_for, kdir_for, make_args
from tests.conftest import missing, run_station


@pytest.fixture(scope="module")
def headers() -> tuple[str, Path]:
    """A kernel build tree on this machine and the release it builds for (its directory's name,
    as Debian's linux-headers-<release> package installs it)."""
    trees = sorted(p.parent for p in Path("/usr/src").glob("linux-headers-*/Makefile")
                   if not p.parent.name.endswith(("-common", "-common-rt")))
    if not trees:
        missing("no Debian kernel headers in /usr/src (scripts/test.sh installs the VM kernels')")
    return trees[0].name.removeprefix("linux-headers-"), trees[0]


def test_a_build_is_for_the_tree_it_was_built_against_and_is_kept(headers, tmp_path):
    from station.vm import latency_modules

    release, tree = headers
    first = build_for(release, tree, root=tmp_path)
    assert not first.reused and first.release == release
    assert first.sources_hash == latency_modules.sources_hash()
    assert set(first.built_for) == set(latency_modules.MODULES)
    for name in latency_modules.MODULES:  # read from the files make wrote, not from the record
        assert vermagic((Path(first.out_dir) / name).read_bytes()).split()[0] == release
    again = build_for(release, tree, root=tmp_path)
    assert again.reused and again.out_dir == first.out_dir


def test_a_tree_for_another_kernel_builds_modules_that_never_reach_the_target(headers, tmp_path,
                                                                              monkeypatch):
    """The twin runs 3.4.55-rtai: modules built against this machine's headers are for another
    kernel, and `station modules build` refuses them before upload, naming both kernels; the
    twin's own module file is left as it was."""
    from station.twin.runner import Twin
    from station.twin.target import MODULE_DIR, module_file

    monkeypatch.setenv("IRQ_STATION_MODULES_DIR", str(tmp_path / "cache"))
    release, tree = headers
    twin = Twin(state_dir=tmp_path / "twin", seed=7, with_scope=False)
    ends = twin.start_in_thread()
    try:
        path = tmp_path / "c.yaml"
        path.write_text(
            "name: build\nbench:\n"
            f"  target: {{kind: ssh, family: mainline, host: 127.0.0.1, port: {ends.ssh_port}, "
            f"user: root, identity_file: '{ends.identity_file}', "
            f"known_hosts: '{ends.known_hosts}'}}\n"
            "  scope: {kind: none}\n"
            f"module: {{kdir: '{tree}'}}\n"
            "matrix: {interfaces: [lpt], variants: [inb], samples: 100}\n")
        res = run_station("modules", "build", str(path), timeout=600)
        assert res.returncode == 2, res.stdout + res.stderr
        assert f"are for kernel {release}" in res.stderr
        assert "the target runs 3.4.55-rtai: refused before upload" in res.stderr
        kept = twin.call(lambda: twin.target.files[f"{MODULE_DIR}/lpt_latency.ko"])
        assert kept == module_file()
        uploads = twin.call(lambda: [c for c in twin.target.command_log if "cat >" in c])
        assert uploads == []
    finally:
        twin.stop_thread()


def test_no_tree_for_the_release_says_what_to_install(tmp_path):
    with pytest.raises(ModuleBuildError) as err:
        kdir_for("9.9.9-none", None)
    assert "apt-get install linux-headers-9.9.9-none" in str(err.value)
    with pytest.raises(ModuleBuildError, match="not a kernel build tree"):
        kdir_for("9.9.9-none", str(tmp_path))


def test_a_cross_compiler_prefix_names_its_arch():
    assert make_args("aarch64-linux-gnu-") == ("ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-")
    assert make_args(None) == ()
    with pytest.raises(ModuleBuildError, match="no kernel ARCH known for mips"):
        make_args("mips-linux-gnu-")


@pytest.mark.parametrize(("target", "module", "words"), [
    ("{kind: twin}", "{build: auto}", "is the twin"),
    ("{kind: ssh, host: 10.0.0.2, family: rtai}", "{build: always}", "is an RTAI box"),
    ("{kind: ssh, host: 10.0.0.2, family: mainline}", "{cross_compile: 'x; rm -rf /'}",
     "cross_compile"),
])
def test_a_build_the_station_cannot_make_is_refused_at_its_line(tmp_path, target, module, words):
    path = tmp_path / "c.yaml"
    path.write_text(f"name: x\nbench:\n  target: {target}\n  scope: {{kind: none}}\n"
                    f"module: {module}\nmatrix: {{samples: 100}}\n")
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    assert f"{path}:5" in str(err.value) and words in str(err.value)
