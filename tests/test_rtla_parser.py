"""rtla osnoise top's summary as rtla 6.1 printed it in the project's PREEMPT_RT VM (captured
byte for byte, ANSI colours included), and garbage."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from station.parsers.rtla import OsnoiseRow, OsnoiseTop, RtlaOutputError, parse_osnoise_top

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


# the lines rtla prints, but its table's header: without that header nothing is a row
NOT_HEADERS = [line for f in sorted(FIXTURES.glob("*.txt")) for line in f.read_text().splitlines()
               if "Period" not in line]
TITLE, _, HEADER, *_ = (FIXTURES / "osnoise-top-6.1-cpu1.txt").read_text().splitlines()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=200), st.sampled_from(NOT_HEADERS)), max_size=15))
def test_text_without_the_summary_table_is_refused(lines):
    """Any text, real rows and duration lines among it: without the table's header it is refused,
    with the one documented error, never read as rows (nor does it crash)."""
    text = "\n".join(lines)
    assume("Period" not in text)
    with pytest.raises(RtlaOutputError, match="no osnoise summary"):
        parse_osnoise_top(text)


_counts = st.integers(0, 10**12)
_rows = st.builds(OsnoiseRow, st.integers(0, 8191), _counts, _counts, _counts,
                  st.integers(0, 10_000_000).map(lambda k: k / 100_000),  # % with rtla's 5 decimals
                  _counts, _counts, _counts, _counts, _counts, _counts, _counts)


def _rtla_row(r: OsnoiseRow, sep: str) -> str:
    k = round(r.available_pct * 100_000)
    fields = [f"{r.cpu:3d}", f"#{r.periods}", str(r.runtime_us), str(r.noise_us), f"{k // 100_000}.{k % 100_000:05d}",
              *(str(v) for v in (r.max_noise_us, r.max_single_us, r.hw, r.nmi, r.irq, r.softirq, r.thread))]
    return sep.join(fields)


@settings(max_examples=300, deadline=None)
@given(st.lists(_rows, max_size=8), st.integers(0, 99 * 86400 - 1),
       st.lists(st.sampled_from([" ", "  ", "\t", " " * 12]), min_size=8, max_size=8),
       st.lists(st.booleans(), min_size=8, max_size=8),
       st.sampled_from(["", "\n", "\n\n", "Terminated\n", "\nrtla: interrupted\n  3 #1 1 1 1.00000 1 1 1 1 1 1 1\n"]))
def test_tables_as_rtla_prints_them_are_read_exactly(rows, duration, seps, coloured, tail):
    """Rows of any figures, in any column widths, coloured or not, after the duration line: read
    back value for value; reading stops at the first line that is not a row (blank lines aside)."""
    d, rest = divmod(duration, 86400)
    lines = [TITLE,
             f"duration: {d:3d} {rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d} | time is in us",
             HEADER]
    for r, sep, colour in zip(rows, seps, coloured, strict=False):
        line = "  " + _rtla_row(r, sep) + "  "
        lines.append(f"\x1b[2;37;40m{line}\x1b[0;0;0m" if colour else line)
    top = parse_osnoise_top("\n".join(lines) + "\n" + tail)
    assert top == OsnoiseTop(duration, rows)


FULL = (FIXTURES / "osnoise-top-6.1-cpus0-1.txt").read_text()
FULL_ROWS = [OsnoiseRow(0, 3, 3000000, 21760, 99.27466, 9017, 2493, 4, 0, 756, 0, 130),  # as printed
             OsnoiseRow(1, 3, 3000000, 33079, 98.89736, 14232, 4385, 13, 0, 756, 0, 91)]
HEADER_LINE = 2
DURATION = (FULL.index("duration:"), FULL.index(" | time"))  # where its figure is: "duration:   0 00:00:03"


def test_mangled_captures_lose_what_the_junk_hit_and_nothing_else():
    """ESC[0m# inserted once or twice at every place of a real capture: the line it lands in is
    lost (the header: the whole table is refused; a row: reading stops there; the duration's figure:
    no duration), every other line is read as it was."""
    assert parse_osnoise_top(FULL) == OsnoiseTop(3, FULL_ROWS)
    for cut in range(len(FULL) + 1):
        hit = FULL[:cut].count("\n")  # the line the junk lands in
        for junk in (1, 2):
            text = FULL[:cut] + "\x1b[0m#" * junk + FULL[cut:]
            if hit == HEADER_LINE:
                with pytest.raises(RtlaOutputError, match="no osnoise summary"):
                    parse_osnoise_top(text)
                continue
            top = parse_osnoise_top(text)
            assert top.rows == (FULL_ROWS[:hit - HEADER_LINE - 1] if hit > HEADER_LINE else FULL_ROWS), cut
            if not DURATION[0] < cut <= DURATION[1]:  # not in "duration:   0 00:00:03"
                assert top.duration_s == 3, cut
            elif cut == DURATION[1]:  # "00:00:03#": glued to the figure's end: not a figure that ends there
                assert top.duration_s is None, cut
            else:  # "00:00:0#3" too: no duration, not the seconds' first digit
                assert top.duration_s is None, cut
