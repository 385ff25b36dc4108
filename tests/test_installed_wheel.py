"""A regular (non-editable) install stands on its own: the wheel of this checkout, installed into
an empty directory and imported from there (never from the checkout), finds what it reads at run
time inside the package — the kernel module sources `station vm build` compiles for the guest, the
twin's presets and register map, the report template — and runs a short demo campaign on the twin.

The wheel is built from a copy of what pyproject.toml packages (so the checkout gets no build/ or
egg-info churn while others work in it), with this environment's setuptools and no build isolation,
and installed without dependencies: they are already in this environment.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from station.vm import latency_modules
from tests.conftest import missing

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())

pytestmark = pytest.mark.timeout(300)

# what `make -C target_modules` leaves behind: none of it may be shipped
BUILD_PRODUCTS = (
    "linux/lpt_latency.ko",
    "linux/lpt_main.o",
    "linux/.lpt_main.o.cmd",
    "linux/lpt_latency.mod",
    "linux/lpt_latency.mod.c",
    "linux/lpt_latency-shared/irqs_stream.o",
    "linux/Module.symvers",
    "linux/modules.order",
    "tools/irqs-dump",
    "tools/irqgap",
    "tools/irqgap-static",
    "tools/gpio_responder_user",
    "tools/gpio_responder_user-static",
)


def _pip(*args: str, cwd: Path) -> str:
    res = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert res.returncode == 0, f"pip {' '.join(args)} failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    return res.stdout + res.stderr


def _isolation_flags() -> list[str]:
    """--no-build-isolation when this environment meets build-system.requires (scripts/test.sh installs
    the test extras, which do); else pip builds in isolation, fetching setuptools from PyPI."""
    for spec in PYPROJECT["build-system"]["requires"]:
        req = Requirement(spec)
        try:
            have = importlib.metadata.version(req.name)
        except importlib.metadata.PackageNotFoundError:
            return []
        if not req.specifier.contains(have, prereleases=True):
            return []
    return ["--no-build-isolation"]


def _copy_project(dest: Path) -> None:
    """pyproject.toml, the readme and every directory package-dir maps, as they are in the checkout."""
    dest.mkdir()
    for name in ("pyproject.toml", PYPROJECT["project"]["readme"], "MANIFEST.in"):
        if (REPO / name).is_file():
            shutil.copy2(REPO / name, dest / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for directory in sorted(set(PYPROJECT["tool"]["setuptools"]["package-dir"].values())):
        shutil.copytree(REPO / directory, dest / directory, ignore=ignore)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    project, wheels, site, cwd = tmp / "project", tmp / "wheels", tmp / "site", tmp / "cwd"
    _copy_project(project)
    modules_src = project / "target_modules"
    for rel in BUILD_PRODUCTS:
        (modules_src / rel).parent.mkdir(parents=True, exist_ok=True)
        (modules_src / rel).write_bytes(b"\x7fELF build product")
    built = _pip("wheel", "--no-deps", *_isolation_flags(), "-w", str(wheels), str(project), cwd=tmp)
    (wheel,) = wheels.glob("irq_station-*.whl")
    _pip("install", "--no-deps", "--no-compile", "--target", str(site), str(wheel), cwd=tmp)
    cwd.mkdir()
    return {
        "site": site,
        "cwd": cwd,
        "build_output": built,
        "sources": [str(p.relative_to(modules_src)) for p in latency_modules._sources(modules_src)],
        "sources_hash": latency_modules.sources_hash(modules_src),
    }


def _python(installed, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """This environment's python (for the dependencies), importing the station from the install only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(PYTHONPATH=str(installed["site"]), PYTHONNOUSERSITE="1", COLUMNS="200")
    return subprocess.run(
        [sys.executable, *args],
        cwd=installed["cwd"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_build_prints_no_license_deprecation(installed):
    out = installed["build_output"]
    assert "project.license" not in out and "License classifiers are deprecated" not in out, out


def test_wheel_ships_the_module_sources_and_no_build_products(installed):
    site = installed["site"]
    shipped = site / "station" / latency_modules.PACKAGED_DIR
    assert (shipped / "Makefile").is_file() and (shipped / "linux" / "Kbuild").is_file()
    for rel in BUILD_PRODUCTS:
        assert not (shipped / rel).exists(), f"build product {rel} is in the wheel"
    listed = sorted(str(p.relative_to(shipped)) for p in shipped.rglob("*") if p.is_file())
    assert listed == sorted(installed["sources"])
    # nothing outside the two packages: no top-level target_modules/, fpga/ or configs/
    top = {p.name for p in site.iterdir() if not p.name.endswith(".dist-info") and p.name != "bin"}
    assert top == {"station", "instruments"}


def test_vm_build_preparation_uses_the_installed_sources(installed, tmp_path):
    script = textwrap.dedent(
        """
        import json, sys
        from pathlib import Path
        import station
        from station.twin import echoer, model
        from station.vm import hostdeps, latency_modules as lm
        tree = lm.prepare_tree(Path(sys.argv[1]))  # what build_image() compiles, minus make and QEMU
        print(json.dumps({
            "station": station.__file__,
            "src": str(lm.module_sources()),
            "hash": lm.sources_hash(),
            "tree": sorted(str(p.relative_to(tree)) for p in tree.rglob("*") if p.is_file()),
            "registers": str(echoer.registers_yaml_path()),
            "presets": str(model.PRESET_DIR),
            "ci_deps": str(hostdeps.CI_DEPS) if hostdeps.CI_DEPS.is_file() else None,
        }))
        """
    )
    res = _python(installed, "-c", script, str(tmp_path / "build"))
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout)
    site = installed["site"].resolve()
    assert Path(got["station"]).resolve().is_relative_to(site), f"imported {got['station']}, not the install"
    assert Path(got["src"]).resolve() == site / "station" / latency_modules.PACKAGED_DIR
    assert got["hash"] == installed["sources_hash"]  # the cache key build_image() stores: same as the checkout's
    assert got["tree"] == sorted(installed["sources"])
    for key in ("registers", "presets", "ci_deps"):
        assert got[key] and Path(got[key]).resolve().is_relative_to(site), (key, got[key])


def test_demo_campaign_runs_from_the_install(installed, tmp_path):
    config = yaml.safe_load((REPO / "configs" / "rtai-lpt-vs-pcie.yaml").read_text())
    config["matrix"].update(samples=2000, pulses=100, max_duration="1min")
    cfg = tmp_path / "demo-short.yaml"
    cfg.write_text(yaml.safe_dump(config, sort_keys=False))
    out = tmp_path / "out"

    res = _python(installed, "-m", "station.cli", "validate", str(cfg))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "valid" in res.stdout

    res = _python(installed, "-m", "station.cli", "run", str(cfg), "--out", str(out), timeout=200)
    assert res.returncode == 0, (res.stdout + res.stderr)[-3000:]
    assert (out / "report.html").stat().st_size > 0
    report = json.loads((out / "report.json").read_text())
    assert [r["status"] for r in report["runs"]] == ["complete"] * 4


def test_installed_sources_build_the_modules(installed, tmp_path):
    """The make step of `station vm build`, from the installed tree, against the host's kernel headers."""
    from station.vm.kernel import headers_releases

    releases = headers_releases()
    if not releases or shutil.which("make") is None:
        missing("no Debian kernel headers or make (target_modules/scripts/ci-deps.sh installs them)")
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from station.vm import kernel, latency_modules as lm
        kdir, work = kernel.headers_dir(sys.argv[1]), Path(sys.argv[2])
        for ko in lm.build(kdir, work / "build", work / "modules"):
            print(ko.name)
        """
    )
    res = _python(installed, "-c", script, releases[-1], str(tmp_path), timeout=200)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == list(latency_modules.MODULES)
