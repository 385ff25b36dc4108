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


def test_a_build_on_the_target_runs_its_make_in_a_scratch_directory_it_then_removes(
        headers, local, tmp_path, monkeypatch):
    """This machine as the target over real SSH, its make and compiler against a tree named on
    it (module.target_kdir): the modules read back are for that tree's kernel (their vermagic,
    read from the files), the scratch directory is gone, and unless that kernel is the one
    running, nothing reached module_dir: the refusal names both kernels."""
    import os

    monkeypatch.setenv("IRQ_STATION_MODULES_DIR", str(tmp_path / "cache"))
    release, tree = headers
    running = os.uname().release
    before = set(Path("/tmp").glob("irq-station-build.*"))
    module_dir = tmp_path / "on-target"
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: build\nbench:\n"
        f"  target: {local.target_yaml(family='mainline', module_dir=repr(str(module_dir)))}\n"
        "  scope: {kind: none}\n"
        f"module: {{build_on: target, target_kdir: '{tree}'}}\n"
        "matrix: {interfaces: [lpt], variants: [inb], samples: 100}\n")
    res = run_station("modules", "build", str(path), timeout=900)
    assert set(Path("/tmp").glob("irq-station-build.*")) == before  # the scratch is removed
    built = list((tmp_path / "cache").glob("*/lpt_latency.ko"))
    assert len(built) == 1 and vermagic(built[0].read_bytes()).split()[0] == release
    if release == running:  # a machine whose headers are its own kernel's: the build is used
        assert res.returncode == 0, res.stdout + res.stderr
        assert vermagic((module_dir / "lpt_latency.ko").read_bytes()).split()[0] == running
    else:
        assert res.returncode == 2, res.stdout + res.stderr
        assert f"built on {local.user}@{local.host}:{local.port} against {tree}" in res.stderr
        assert f"are for kernel {release}" in res.stderr
        assert f"the target runs {running}: refused before upload" in res.stderr
        assert not module_dir.exists() or not list(module_dir.glob("*.ko"))


def test_auto_says_why_neither_the_target_nor_the_station_can_build(local, tmp_path):
    """No tree for the running kernel here or on the target (this machine's own, as a target):
    the error says what each one lacks, before any make."""
    import os

    running = os.uname().release
    if Path(f"/lib/modules/{running}/build/Makefile").is_file():
        pytest.skip(f"this machine has a build tree for its own kernel {running}")
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: build\nbench:\n"
        f"  target: {local.target_yaml(family='mainline', module_dir=repr(str(tmp_path / 'm')))}\n"
        "  scope: {kind: none}\n"
        "matrix: {interfaces: [lpt], variants: [inb], samples: 100}\n")
    res = run_station("modules", "build", str(path), timeout=120)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"no kernel build tree for {running} on this station" in res.stderr
    assert f"nor can the target build them (it lacks a kernel build tree at /lib/modules/{running}/build" in res.stderr


@pytest.mark.parametrize(("module", "words"), [
    ("{build_on: target, kdir: /usr/src/x}", "is for a build on the station"),
    ("{build_on: station, target_kdir: /usr/src/x}", "is for a build on the target"),
    ("{target_kdir: 'x; reboot'}", "target_kdir"),
])
def test_where_to_build_and_its_tree_must_agree(tmp_path, module, words):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nbench:\n  target: {kind: ssh, host: 10.0.0.2, family: mainline}\n"
                    f"  scope: {{kind: none}}\nmodule: {module}\nmatrix: {{samples: 100}}\n")
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    assert f"{path}:5" in str(err.value) and words in str(err.value)
