"""irq-station's pytest plugin (entry point `pytest11`, docs/ci.md): the `irq_station` fixture runs
a campaign — a file, or one built in the test as a dict — on a bench with `station run --check`,
and returns its typed report (station.api.validate_report) and its budgets' verdicts, so a test
asserts on figures and budgets:

    def test_pcie_meets_its_budget(irq_station):
        result = irq_station.run("configs/pcie.yaml", budgets=["p99.99 <= 50us"])
        assert result.report.runs[0].sw.max_ns < 200_000
        result.assert_budgets_met()

With labgrid's own pytest plugin (`--lg-env ENV.yaml`, `--lg-coordinator`), the bench's target is
the labgrid place the environment's `main` target names (its RemotePlace): the campaign's target
becomes `kind: labgrid` on that place and that coordinator, its SSH keys and timeouts kept. The
station acquires the place for the run and releases it (one you hold is used and left yours).

The campaign runs as `station run` does, in its own process (a real CLI run, its exit status
read): what the fixture returns is what a user's shell would have got.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# the target keys a labgrid place keeps from the campaign's own target (the rest is the place's)
KEPT_TARGET_KEYS = ("identity_file", "known_hosts", "connect_timeout", "reconnect_for", "user",
                    "family", "module_dir", "work_dir", "fifo", "sudo", "upload_modules",
                    "ssh_resource")


class StationRunFailed(AssertionError):
    """`station run` could not measure or report (not a budget missed: that is the verdict)."""


@dataclass
class StationResult:
    out: Path  # the campaign's results directory
    report: Any  # station.report.model's Report: report.json, typed
    check: Any  # station.analysis.budgets.CheckResult, or None without budgets
    returncode: int
    stdout: str
    stderr: str
    place: str | None = None  # the labgrid place it ran on

    def assert_budgets_met(self) -> None:
        """An AssertionError naming each budget not met (missed or undecided) with its figures."""
        if self.check is None:
            raise AssertionError("the campaign states no budgets")
        unmet = [v.message for v in self.check.verdicts if v.verdict != "met"]
        if unmet:
            raise AssertionError("budgets not met:\n  " + "\n  ".join(unmet))


def labgrid_place(config: pytest.Config) -> tuple[str, str | None] | None:
    """(place, coordinator) of labgrid's environment (`--lg-env`) `main` target, None without
    one."""
    try:
        from labgrid.pytestplugin.hooks import LABGRID_ENV_KEY
    except ImportError:
        return None
    env = config.stash.get(LABGRID_ENV_KEY, None)
    if env is None:
        return None
    targets = env.config.get_targets() or {}
    main = targets.get("main") or {}
    resources = main.get("resources") or {}
    items = resources.items() if isinstance(resources, dict) else (
        kv for entry in resources for kv in (entry or {}).items())
    place = next((str((args or {}).get("name")) for cls, args in items
                  if cls == "RemotePlace" and (args or {}).get("name")), None)
    if place is None:
        raise pytest.UsageError(f"{env.config_file}: targets.main has no RemotePlace with a name: "
                                "irq-station's target is a labgrid place")
    try:
        coordinator = env.config.get_option("coordinator_address")
    except KeyError:
        coordinator = None
    return place, coordinator


class StationBench:
    """What the `irq_station` fixture gives a test."""

    def __init__(self, config: pytest.Config, workdir: Path) -> None:
        self.workdir = workdir
        self.labgrid = labgrid_place(config)
        self._runs = 0

    @property
    def place(self) -> str | None:
        return self.labgrid[0] if self.labgrid else None

    def campaign(self, campaign: str | Path | dict[str, Any],
                 budgets: list[str] | None = None) -> dict[str, Any]:
        """The campaign as it will run: read, its budgets added, its target the labgrid place."""
        import yaml

        data = dict(campaign) if isinstance(campaign, dict) else yaml.safe_load(
            Path(campaign).read_text())
        if budgets:
            data["budgets"] = [*data.get("budgets", []), *budgets]
        if self.labgrid is not None:
            place, coordinator = self.labgrid
            bench = dict(data.get("bench") or {})
            own = dict(bench.get("target") or {})
            target = {k: own[k] for k in KEPT_TARGET_KEYS if k in own}
            target |= {"kind": "labgrid", "place": place}
            if coordinator:
                target["coordinator"] = coordinator
            bench["target"] = target
            data["bench"] = bench
        return data

    def run(self, campaign: str | Path | dict[str, Any], *, budgets: list[str] | None = None,
            out: Path | None = None, timeout: float = 3600) -> StationResult:
        import json

        import yaml

        from station import api

        self._runs += 1
        data = self.campaign(campaign, budgets)
        path = self.workdir / f"campaign-{self._runs}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        out = Path(out) if out is not None else self.workdir / f"results-{self._runs}"
        has_budgets = bool(data.get("budgets"))
        res = subprocess.run([sys.executable, "-m", "station.cli", "run", str(path), "--out",
                              str(out), *(["--check"] if has_budgets else [])],
                             capture_output=True, text=True, timeout=timeout,
                             env=dict(os.environ, COLUMNS="200"))
        allowed = (0, 1, 3) if has_budgets else (0,)
        report_path = out / "report.json"
        if res.returncode not in allowed or not report_path.exists():
            raise StationRunFailed(f"station run {path} exited {res.returncode}:\n"
                                   f"{res.stderr[-4000:]}")
        report = api.validate_report(json.loads(report_path.read_text()))
        check = api.check_budgets(out) if has_budgets else None
        return StationResult(out, report, check, res.returncode, res.stdout, res.stderr,
                             self.place)


# The one warning the station silences (station/__init__.py: asyncssh touching cryptography's
# deprecated DSA classes). This plugin imports the station while pytest loads its plugins, inside
# a warnings context that is undone afterwards: the filter is set again where a suite's conftest
# and tests import asyncssh.
DSA_WARNING = "ignore:DSA is deprecated:UserWarning"


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    import warnings

    warnings.filterwarnings("ignore", message="DSA is deprecated", category=UserWarning)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("filterwarnings", DSA_WARNING)


@pytest.fixture
def irq_station(request: pytest.FixtureRequest, tmp_path: Path) -> StationBench:
    """Runs campaigns on a bench (with labgrid's --lg-env: its place) and returns typed reports."""
    return StationBench(request.config, tmp_path)
