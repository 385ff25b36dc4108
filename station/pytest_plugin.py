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
KEPT_TARGET_KEYS = ("identity_file", "known_hosts", "connect_timeout", "reconnect_for", "family",
                    "module_dir", "work_dir", "fifo", "sudo", "upload_modules", "ssh_resource")


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
    asked = getattr(config.option, "lg_env", None) or os.environ.get("LG_ENV")
    try:
        from labgrid.factory import TargetFactory
        from labgrid.pytestplugin.hooks import LABGRID_ENV_KEY
    except ImportError as exc:
        if asked:  # never the campaign's own bench instead of the place asked for
            raise pytest.UsageError(f"--lg-env {asked}: irq-station reads labgrid's environment "
                                    f"through labgrid 24 or later ({exc})") from None
        return None
    env = config.stash.get(LABGRID_ENV_KEY, None)
    if env is None:
        return None
    main = (env.config.get_targets() or {}).get("main") or {}
    # labgrid's own reading of a target's resources, whichever of its forms the file uses
    resources, _ = TargetFactory.normalize_config(main)
    places = list((resources.get("RemotePlace") or {}).keys())
    place = places[0] if len(places) == 1 else None
    if place is None:
        raise pytest.UsageError(f"{env.config_file}: targets.main names {len(places)} "
                                "RemotePlace resources: irq-station's target is one labgrid place")
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
            data["budgets"] = [*(data.get("budgets") or []), *budgets]
        if self.labgrid is not None:
            place, coordinator = self.labgrid
            bench = dict(data.get("bench") or {})
            if "targets" in bench:
                raise pytest.UsageError("with --lg-env the bench's target is labgrid's place: "
                                        "the campaign must name one bench.target, not targets")
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

        from station import api, kind_registry

        self._runs += 1
        data = self.campaign(campaign, budgets)
        path = self.workdir / f"campaign-{self._runs}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        out = Path(out) if out is not None else self.workdir / f"results-{self._runs}"
        has_budgets = bool(data.get("budgets"))
        returncode, stdout, stderr = _run_station(
            [sys.executable, "-m", "station.cli", "run", str(path), "--out", str(out),
             *(["--check"] if has_budgets else [])], timeout)
        report_path = out / "report.json"
        # with budgets, 1 is one missed and 3 one undecided, but 3 is also runs that did not
        # complete or a target lost: those are read from the results, not from the status
        if returncode not in ((0, 1, 3) if has_budgets else (0,)) or not report_path.exists():
            raise StationRunFailed(f"station run {path} exited {returncode}:\n{stderr[-4000:]}")
        raw = json.loads(report_path.read_text())
        try:
            lost = json.loads((out / "campaign.json").read_text()).get("unavailable") or {}
        except (OSError, ValueError):
            lost = {}
        unfinished = [f"{r.get('id')} ({r.get('status')})" for k in kind_registry.kinds().values()
                      for r in kind_registry.report_runs(k, raw) if r.get("status") != "complete"]
        unfinished += [f"target {name} unavailable ({why})" for name, why in lost.items()]
        if unfinished:
            raise StationRunFailed(f"station run {path}: not every run measured: "
                                   f"{', '.join(unfinished)}\n{stderr[-4000:]}")
        report = api.validate_report(raw)
        check = api.check_budgets(out) if has_budgets else None
        return StationResult(out, report, check, returncode, stdout, stderr, self.place)


def _run_station(command: list[str], timeout: float) -> tuple[int, str, str]:
    """`station run` in its own session; past the timeout, interrupted as Ctrl-C does (it tears the
    run down and releases the place), killed only if that does not end it within a minute."""
    import signal

    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, COLUMNS="200"), start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            stdout, stderr = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
        raise StationRunFailed(f"station run did not end within {timeout:g} s (interrupted):\n"
                               f"{stderr[-4000:]}") from None
    return proc.returncode, stdout, stderr


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
