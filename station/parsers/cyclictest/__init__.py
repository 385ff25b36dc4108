"""What cyclictest (rt-tests) really prints, parsed: the ``--json=FILE`` file, the histogram
that ``-h``/``-H`` print on stdout, and the live status lines.

Formats, as read in the rt-tests sources and seen in the fixtures of
tests/fixtures/cyclictest/ (captured from rt-tests 0.66, 0.83, 1.10, 2.4, 2.8 and 2.10-dev):

* Histogram text: ``# Histogram``, then one row per bucket, ``%06d`` bucket index and one
  ``%06lu`` count per thread (tab separated), plus a summary column with ``-H``/``--histofall``
  when there is more than one thread (from 2.7 the rows have it with one thread too). Up to
  2.6 every bucket of the range is printed and a ``# Total:`` line (per column: the sum of the
  printed rows, overflows excluded) follows; from 2.7 rows whose counts are all zero are left
  out and there is no ``# Total:``. Then ``# Min Latencies:`` and ``# Avg Latencies:`` (per
  thread; since 0.74), ``# Max Latencies:`` (``Latencys`` up to 0.72) and
  ``# Histogram Overflows:`` (both with the summary column under -H),
  ``# Histogram Overflow at cycle number:`` (since 0.85) with one ``# Thread N:`` line per
  thread listing the 0-based cycle numbers of at most ``-h`` overflows and `` # NNNNN others``
  for the rest (2.7+ also print ``# 00000 others`` when exactly ``-h`` overflowed),
  ``# SMIs:`` with --smi, a blank line (0.85+); with -b: ``# Thread Ids:``,
  ``# Break thread:`` and ``# Break value:`` (since 0.76).
  Every cycle lands either in a bucket or among the overflows, so a thread's cycles are
  sum(counts) + overflows. The text does not print the cycle count: it is derived that way.
* Units: µs, or ns with ``-N``, for the figures and the bucket indices alike; cyclictest
  truncates a latency to the unit (sample in bucket k: latency in [k, k+1) units). The text
  does not say which: ``parse_histogram(..., nsecs=True)`` for output of ``-N``. The JSON says
  it in ``resolution_in_ns``, which is the -N flag (0 or 1), not a resolution.
* The JSON: ``"cmdline:"`` and ``"rt_test_version:"`` have the colon inside the key;
  ``rt_test_version`` is ``printf("%1.2f")`` of the version (2.4 → "2.40", 2.10 → "2.10").
  The command line is written unescaped (a ``"`` in an argument makes the file invalid JSON)
  and a thread without cycles has ``"avg": -nan``: both are repaired here, and the report
  lists the repairs. Histogram keys are bucket indices, non-zero buckets only; up to 2.6 the
  ``"histogram"`` object is there (empty) even without -h, from 2.7 only with -h. There is no
  overflow count in the JSON: with -h it is cycles - sum(histogram). The JSON is written
  before the threads are joined, the text after; they agree in practice.
* The average: JSON has it with two decimals (rounded), text and status lines have its
  integer part (C cast to long): ``avg_truncated`` says which.
* A thread that never ran (-b stopped the run first) prints cyclictest's initial values
  (min 1000000, max 0 or -1000000, avg -nan or 0): with cycles == 0 they become None here.

Everything malformed raises :class:`CyclictestOutputError` (a ValueError) with the line
(text) or the JSON path; absurd sizes are refused the same way (more than ``MAX_THREADS``
threads, bucket indices above ``MAX_BUCKET``, counts of 2**63 or more).

Its modules: model.py (what the parsers give, the limits, the error), text.py (stdout),
json_report.py (the --json file); this package's face re-exports what the station and the tests use.
"""

from __future__ import annotations

from station.parsers.cyclictest.json_report import histogram_option, parse_json
from station.parsers.cyclictest.model import (
    HIST_MAX,
    MAX_BUCKET,
    MAX_THREADS,
    CyclictestOutputError,
    CyclictestReport,
    CyclictestThread,
    HistogramOutput,
    StatusLine,
    SysInfo,
)
from station.parsers.cyclictest.text import parse_histogram, parse_status_lines

__all__ = [
    "CyclictestOutputError", "CyclictestReport", "CyclictestThread", "HIST_MAX", "HistogramOutput",
    "MAX_BUCKET", "MAX_THREADS", "StatusLine", "SysInfo", "histogram_option", "parse_histogram",
    "parse_json", "parse_status_lines",
]
