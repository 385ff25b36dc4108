"""The garbage collector's thresholds while a campaign is analysed (station/analysis/collector.py):
rarer passes inside, the caller's own after, whatever the nesting, the threads or an error; and the
cycles a report makes are still freed without anyone calling gc.collect()."""

from __future__ import annotations

import gc
import threading
import weakref
from pathlib import Path

import pytest

from station import api
from station.analysis.collector import RARE, rare_collections

OWN = (900, 11, 12)  # a caller's thresholds, unlike both Python's defaults and RARE


@pytest.fixture
def own_thresholds():
    before = gc.get_threshold()
    gc.set_threshold(*OWN)
    yield
    gc.set_threshold(*before)


def test_rare_inside_the_callers_own_after_even_after_an_error(own_thresholds) -> None:
    with rare_collections():
        assert gc.get_threshold() == RARE
    assert gc.get_threshold() == OWN
    with pytest.raises(RuntimeError), rare_collections():
        raise RuntimeError("the analysis failed")
    assert gc.get_threshold() == OWN


def test_nested_and_overlapping_scopes_restore_what_the_first_found(own_thresholds) -> None:
    with rare_collections():
        with rare_collections():
            pass
        assert gc.get_threshold() == RARE  # the inner exit leaves the outer's scope alone
    assert gc.get_threshold() == OWN
    # two threads, the first leaving while the second is still inside
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, tuple[int, int, int]] = {}

    def first() -> None:
        with rare_collections():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    def second() -> None:
        first_in.wait(10)
        with rare_collections():
            second_in.set()
            first_out.wait(10)
            seen["second, after the first left"] = gc.get_threshold()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"second, after the first left": RARE}
    assert gc.get_threshold() == OWN


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_cycles_made_inside_are_freed_without_a_collect_call(own_thresholds) -> None:
    with rare_collections():
        a, b = _Node(), _Node()
        a.other, b.other = b, a  # a cycle: reference counting alone never frees it
        gone = weakref.ref(a)
        del a, b
        # as many new containers as a young-generation pass waits for, and some
        keep = [[] for _ in range(RARE[0] + 1000)]
        assert gone() is None, "the young pass did not come: the cycle is still alive"
        del keep


def test_a_report_is_analysed_and_written_at_rare_thresholds_and_leaves_the_callers(
        own_thresholds, tmp_path: Path, monkeypatch) -> None:
    import station.analysis
    import station.report
    from tests.test_report_schema import _cyclictest_campaign

    seen = {}
    analyse, write = station.analysis.analyse_campaign, station.report.write_reports

    def analysing(*args, **kwargs):
        seen["analysis"] = gc.get_threshold()
        return analyse(*args, **kwargs)

    def writing(*args, **kwargs):
        seen["writing"] = gc.get_threshold()
        return write(*args, **kwargs)

    monkeypatch.setattr(station.analysis, "analyse_campaign", analysing)
    monkeypatch.setattr(station.report, "write_reports", writing)
    campaign = _cyclictest_campaign(tmp_path / "c", "c")
    api.write_campaign_report(campaign)
    assert (campaign / "report.json").exists()
    assert seen == {"analysis": RARE, "writing": RARE}
    assert gc.get_threshold() == OWN
