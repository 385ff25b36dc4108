"""rtla osnoise top's summary as rtla 6.1 printed it in the project's PREEMPT_RT VM (captured
byte for byte, ANSI colours included), and garbage."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from station.parsers.rtla import OsnoiseRow, RtlaOutputError, parse_osnoise_top

FIXTURES = Path(__file__).parent / "fixtures" / "rtla"


def test_one_cpu_as_rtla_6_1_prints_it():
    top = parse_osnoise_top((FIXTURES / "osnoise-top-6.1-cpu1.txt").read_text())
    assert top.duration_s == 5
    assert top.rows == [OsnoiseRow(1, 5, 5000196, 121677, 97.56655, 26414, 482, 1828, 0, 1265, 0, 139)]


def test_several_cpus():
    top = parse_osnoise_top((FIXTURES / "osnoise-top-6.1-cpus0-1.txt").read_text())
    assert top.duration_s == 3
    assert [(r.cpu, r.max_single_us, r.hw, r.irq, r.thread) for r in top.rows] == [(0, 2493, 4, 756, 130),
                                                                                   (1, 4385, 13, 756, 91)]


def test_an_interrupted_rtla_with_no_rows_and_other_text():
    text = (FIXTURES / "osnoise-top-6.1-cpu1.txt").read_text().rsplit("\n", 2)[0] + "\n"
    assert parse_osnoise_top(text).rows == []
    with pytest.raises(RtlaOutputError, match="no osnoise summary"):
        parse_osnoise_top("Terminated\n")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=3000))
def test_any_text_parses_or_is_refused_plainly(text):
    with contextlib.suppress(RtlaOutputError):
        parse_osnoise_top(text)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 400), st.integers(0, 200))
def test_truncated_and_mangled_captures(cut, junk):
    text = (FIXTURES / "osnoise-top-6.1-cpus0-1.txt").read_text()
    text = text[:cut] + "\x1b[0m#" * (junk % 3) + text[cut:]
    try:
        top = parse_osnoise_top(text)
    except RtlaOutputError:
        return
    assert all(r.cpu in (0, 1) for r in top.rows)
