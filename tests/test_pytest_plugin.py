"""irq-station's pytest plugin (station/pytest_plugin.py, docs/ci.md) under labgrid's own pytest
plugin: pytest runs an example test file with `--lg-env`, whose `main` target is the place
tests/test_labgrid.py's coordinator serves (the standalone twin's SSH server behind it); the
example's `irq_station` fixture runs its campaign there and asserts a budget.

Truth: the twin's log of the events it made (`station twin --truth-dir`: every module load's
injected t_SW), read here after the example ran; who held the place, from labgrid's own client."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import running_twin
from tests.test_labgrid import PLACE, _holder, lab  # noqa: F401 - the fixture

EXAMPLE = '''
"""A latency budget asserted from a test; the bench is labgrid's place (--lg-env)."""

CAMPAIGN = {{
    "name": "plugin-example",
    "bench": {{"target": {{"kind": "labgrid", "identity_file": {identity!r},
                         "known_hosts": {known_hosts!r}, "connect_timeout": "5s"}},
              "scope": {{"kind": "none"}}}},
    "matrix": {{"interfaces": ["lpt"], "variants": ["inb"], "loads": ["none"], "samples": 3000,
               "max_duration": "5min"}},
}}


def test_the_lpt_answers_within_its_budget(irq_station):
    result = irq_station.run(CAMPAIGN, budgets=[{budget!r}], out={out!r})
    assert result.place == {place!r}
    (run,) = result.report.runs
    assert run.status == "complete" and run.sw.count >= 3000
    result.assert_budgets_met()
'''


@pytest.fixture(scope="module")
def truth_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("twin-truth")


@pytest.fixture(scope="module")
def twin_server(tmp_path_factory, truth_dir):
    """test_labgrid's twin behind the place, here with its log of every event it makes."""
    yield from running_twin(tmp_path_factory.mktemp("twin") / "state", "--truth-dir", str(truth_dir))


def _example(tmp_path, bench: dict, budget: str) -> subprocess.CompletedProcess:
    twin = bench["twin"]
    (tmp_path / "test_example.py").write_text(EXAMPLE.format(
        identity=twin["identity_file"], known_hosts=twin["known_hosts"], budget=budget,
        out=str(tmp_path / "results"), place=PLACE))
    (tmp_path / "env.yaml").write_text(yaml.safe_dump(
        {"targets": {"main": {"resources": {"RemotePlace": {"name": PLACE}}}}}))
    # its own directory: this project's conftest and settings stay out of the example's run
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--lg-env", str(tmp_path / "env.yaml"), "--lg-coordinator", bench["address"],
                           "test_example.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600)


def _truth(truth_dir, before: set) -> np.ndarray:
    """The t_SW of the events the twin made for the example's one module load."""
    (new,) = sorted(set(truth_dir.glob("*.parquet")) - before)
    return pd.read_parquet(new, columns=["sw_ns"])["sw_ns"].to_numpy(float)


@pytest.mark.parametrize("budget, passes", [("max <= 10ms", True), ("max <= 1us", False)])
def test_a_test_using_the_plugin_with_labgrids_runs_on_the_place_and_its_budget_decides(
        lab, truth_dir, tmp_path, budget, passes):  # noqa: F811 - the fixture
    assert _holder(lab["address"]) is None
    before = set(truth_dir.glob("*.parquet"))
    res = _example(tmp_path, lab, budget)
    truth = _truth(truth_dir, before)
    # the budget against what the twin made: every event under 10 ms, none under 1 µs
    assert (truth.max() <= 10e6) if passes else (truth.min() > 1e3)
    if passes:
        assert res.returncode == 0 and "1 passed" in res.stdout, res.stdout[-3000:] + res.stderr[-2000:]
    else:
        assert res.returncode == 1 and "1 failed" in res.stdout, res.stdout[-3000:] + res.stderr[-2000:]
        assert "budgets not met" in res.stdout and "max <= 1us: missed" in res.stdout
    # the station took the place for the run and gave it back
    assert _holder(lab["address"]) is None
    manifest_target = yaml.safe_load((tmp_path / "results/campaign.json").read_text())["target"]
    assert manifest_target["place"]["place"] == PLACE


def test_without_labgrid_the_fixture_runs_the_campaign_as_written(irq_station):
    """This suite loads the plugin too (it is installed): no --lg-env, no place; the twin's own
    log of its events (ground_truth) is the budget's truth."""
    assert irq_station.place is None
    result = irq_station.run({
        "name": "plugin-twin",
        "bench": {"target": {"kind": "twin"}, "scope": {"kind": "none"},
                  "twin": {"ground_truth": True}},
        "matrix": {"interfaces": ["pcie"], "variants": ["inb"], "loads": ["none"], "samples": 2000,
                   "max_duration": "5min"},
    }, budgets=["max <= 10ms", "max < 1us"])
    (run,) = result.report.runs
    truth = pd.read_parquet(result.out / "runs" / run.id / "twin-truth.parquet", columns=["sw_ns"])
    assert truth["sw_ns"].max() <= 10e6 and truth["sw_ns"].min() >= 1e3
    assert [v.verdict for v in result.check.verdicts] == ["met", "missed"] and result.returncode == 1
    with pytest.raises(AssertionError, match="max < 1us: missed"):
        result.assert_budgets_met()
