"""rtla timerlat hist as rtla 6.1 (Debian 12) and 6.12 (bookworm-backports) printed it in the
project's PREEMPT_RT VM (tests/fixtures/rtla/timerlat, captured byte for byte), garbage, and the
arguments the station gives it (checked against the real rtla's own argument parser)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from station.kinds.cyclictest.on_target import timerlat_arguments
from station.kinds.cyclictest.settings import CyclictestSettings
from station.parsers.timerlat import Column, Summary, TimerlatOutputError, parse_hist
from station.target.rtla import timerlat_arguments as rtla_arguments
from tests.conftest import missing

FIXTURES = Path(__file__).parent / "fixtures" / "rtla" / "timerlat"


def summary_as_printed(text: str) -> dict[str, list[str]]:
    """The labelled summary rows of a capture, read here: label -> its cells as printed."""
    rows = {}
    for line in text.splitlines():
        label, _, rest = line.partition(":")
        if label in ("over", "count", "min", "avg", "max") and label not in rows:
            rows[label] = rest.split()
    return rows


@pytest.mark.parametrize("name", sorted(p.name for p in FIXTURES.glob("*.txt")))
def test_every_capture_reads_as_rtla_printed_its_summary(name):
    text = (FIXTURES / name).read_text()
    hist = parse_hist(text)
    printed = summary_as_printed(text)
    if not printed:  # --no-index: the last five rows, unlabelled
        table = [line.split() for line in text.splitlines() if line.strip() and line.split()[0].isdigit()]
        printed = {k: table[-5 + j] for j, k in enumerate(("over", "count", "min", "avg", "max"))}
    for label, cells in printed.items():
        got = [getattr(s, label) for s in hist.summary]
        assert got == [None if c == "-" else int(c) for c in cells], (label, name)
    for c, s in enumerate(hist.summary):  # every sample is in a bucket, over the range, or both counted
        assert sum(row[c] for row in hist.counts) + (s.over or 0) <= s.count


def test_the_header_columns_unit_and_what_followed():
    h = parse_hist((FIXTURES / "hist-6.1-cpus0-1.txt").read_text())
    assert (h.unit_ns, h.duration_s) == (1000, 3)
    assert h.columns == [Column("irq", 0), Column("thread", 0), Column("irq", 1), Column("thread", 1)]
    assert h.buckets[:3] == [3, 6, 9] and h.counts[0] == [0, 0, 1, 0]
    assert h.by_cpu()[1]["thread"] == Summary(2518, 597, 29, 391, 13393)
    assert not h.stopped and h.overall == {}
    nano = parse_hist((FIXTURES / "hist-6.1-nano.txt").read_text())
    assert nano.unit_ns == 1 and nano.summary[0].max == 9205760
    bucketed = parse_hist((FIXTURES / "hist-6.1-bucket10.txt").read_text())
    assert bucketed.columns == [Column("irq", 1), Column("thread", 1)] and bucketed.buckets[:2] == [10, 20]
    assert parse_hist((FIXTURES / "hist-6.1-no-irq.txt").read_text()).columns == [Column("thread", 0)]


def test_rtla_6_12_all_section_user_columns_and_its_auto_analysis():
    h = parse_hist((FIXTURES / "hist-6.12-cpus0-1.txt").read_text())
    assert h.overall["thread"] == Summary(3638, None, 48, 240, 20595)
    # ALL's IRQ maximum is the largest of the per-CPU IRQ columns (as printed: 11123)
    assert h.overall["irq"].max == max(s.max for c, s in zip(h.columns, h.summary, strict=True) if c.kind == "irq")
    user = parse_hist((FIXTURES / "hist-6.12-user.txt").read_text())
    assert user.by_cpu()[0]["user"] == Summary(0, 0, None, None, None)  # "-": no sample
    aa = parse_hist((FIXTURES / "hist-6.12-auto-analysis.txt").read_text())
    assert aa.stopped and "## CPU 0 hit stop tracing, analyzing it ##" in aa.analysis
    assert "IRQ latency:" in aa.analysis and aa.summary[0].max == 624
    stopped = parse_hist((FIXTURES / "hist-6.1-stop-thread.txt").read_text())
    assert stopped.stopped and "Saving trace to timerlat_trace.txt" in stopped.analysis


@pytest.mark.parametrize("text, words", [
    ("", "no timerlat histogram"),
    ("Failed to apply CPUs config\nCould not apply config\n", "which says: 'Failed to apply CPUs config'"),
    ("# RTLA timerlat histogram\nIndex IRQ-000 Foo-000\n", "not a timerlat column"),
    ("# RTLA timerlat histogram\nIndex IRQ-000 Thr-000\n3 1\n", "its index and 2 counts"),
    ("# RTLA timerlat histogram\nIndex IRQ-000 Thr-000\n3 1 x\n", "'x' is not a count"),
    ("# RTLA timerlat histogram\nIndex IRQ-000 Thr-000\n5 1 1\n3 1 1\n", "bucket 3 after 5"),
    ("# RTLA timerlat histogram\nIndex IRQ-000 Thr-000\n3 1 1\nover: 0 0\ncount: 1 1\n", "cut short"),
    ("# RTLA timerlat histogram\nIndex IRQ-000\nover: 0\nmin: 1\n", "out of order"),
    ("# RTLA timerlat histogram\nIndex IRQ-000\n3 9\nover: 0\ncount: 1\nmin: 1\navg: 1\nmax: 1\n", "more than"),
])
def test_what_is_not_a_histogram_is_refused_naming_why(text, words):
    with pytest.raises(TimerlatOutputError, match=words):
        parse_hist(text)


CAPTURES = [(FIXTURES / p).read_text() for p in sorted(p.name for p in FIXTURES.glob("*.txt"))]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CAPTURES), st.integers(0, 20_000), st.text(max_size=12))
def test_any_corruption_is_read_or_refused_never_a_crash(text, at, junk):
    at %= len(text) + 1
    try:
        hist = parse_hist(text[:at] + junk + text[at:])
    except TimerlatOutputError:
        return
    for s in hist.summary:
        assert s.count >= 0


# --no-index drops the summary's labels: cut short, it cannot be told from a shorter run (the station
# never asks for it; the parser reads it for a user's own captures)
LABELLED = [text for text in CAPTURES if "count:" in text]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(LABELLED), st.integers(0, 20_000))
def test_a_capture_cut_anywhere_before_its_summary_is_refused(text, at):
    """A killed rtla's output stops mid-histogram: refused (its summary is what the report needs),
    never read as a smaller run."""
    end = text.index("max:") if "max:" in text else len(text.rstrip().rsplit("\n", 1)[0])
    at %= end
    with pytest.raises(TimerlatOutputError):
        parse_hist(text[:at])


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_any_text_is_read_or_refused(text):
    with contextlib.suppress(TimerlatOutputError):  # anything else is a crash
        parse_hist(text)


# --- the arguments ---------------------------------------------------------------------------------


def test_the_companion_measures_where_and_how_cyclictest_did():
    s = CyclictestSettings(interval=250e-6, priority=80, affinity="1-3", histogram=2e-3)
    assert timerlat_arguments(s, 2.5) == ["timerlat", "hist", "-d", "3s", "-p", "250", "-E", "2000", "-c", "1-3",
                                          "-P", "f:80"]
    # every CPU with -S or -a (all); rtla's own priority for a normal-policy cyclictest
    assert "-c" not in timerlat_arguments(CyclictestSettings(smp=True), 10)
    assert "-P" not in timerlat_arguments(CyclictestSettings(policy="other"), 10)
    with pytest.raises(ValueError, match="11 to"):
        rtla_arguments(None, 1, 1000, None, 10)
    # a stop threshold: rtla's auto mode, its trace saved where the station fetches it from
    stopping = CyclictestSettings(companion="timerlat", timerlat_stop=150e-6)
    assert timerlat_arguments(stopping, 3, "/w/timerlat/r.txt")[-3:] == ["-a", "150", "-t=/w/timerlat/r.txt"]


@settings(max_examples=40, deadline=None)
@given(interval_us=st.integers(10, 1_000_000), priority=st.integers(1, 99),
       cpus=st.sampled_from(["all", "none", "0", "0-1", "0,1"]), histogram_us=st.integers(1, 100_000),
       duration=st.floats(0.1, 86_400), stop_us=st.one_of(st.none(), st.integers(1, 1_000_000)))
def test_the_real_rtla_accepts_every_argument_list_the_station_gives_it(interval_us, priority, cpus, histogram_us,
                                                                       duration, stop_us, tmp_path_factory):
    """/usr/bin/rtla's own option parser: an argument it refuses prints its usage; accepted ones get
    as far as the tracer (absent on this kernel, or running for the 0-s duration rtla cannot take)."""
    if not shutil.which("rtla"):
        missing("rtla is not installed (apt-get install rtla)")
    s = CyclictestSettings(interval=interval_us / 1e6, priority=priority, affinity=cpus,
                           histogram=histogram_us / 1e6, companion="timerlat",
                           timerlat_stop=None if stop_us is None else stop_us / 1e6)
    args = timerlat_arguments(s, duration, str(tmp_path_factory.mktemp("tl") / "trace.txt"))
    args[args.index("-d") + 1] = "1s"  # as given, but never run longer than a second here
    got = subprocess.run(["rtla", *args], capture_output=True, text=True, timeout=30)
    assert "usage:" not in got.stdout + got.stderr, (args, got.stderr[:300])
