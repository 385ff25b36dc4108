"""The compiled Schmitt walk (instruments/schmitt_kernel.py) against the numpy code path: the same
pulses, to the bit, on the benchmark's two kinds of record and on garbage codes. (The compiled
walk is also drawn by tests/test_instruments_pulses.py's property test of the code path against
the float path.)"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from instruments import schmitt_kernel
from instruments.pulses import extract_pulses, waveform_edges
from instruments.scope import CodeScale, Waveform

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_extraction import record  # noqa: E402 - the bench's own records


def test_numba_is_there_where_the_station_is_installed():
    why = schmitt_kernel.available()
    if why is not None and os.environ.get("CI"):
        pytest.fail(f"CI installs the station with numba: {why}")
    if why is not None:
        pytest.skip(why)
    assert schmitt_kernel.path_for(schmitt_kernel.MIN_SAMPLES) == "compiled (numba)"
    assert schmitt_kernel.path_for(schmitt_kernel.MIN_SAMPLES - 1).startswith("numpy")


def _both_paths(wf: Waveform, monkeypatch, **asked) -> tuple:
    compiled = extract_pulses(wf, **asked)
    with monkeypatch.context() as m:
        m.setenv("IRQ_STATION_KERNEL", "numpy")
        assert schmitt_kernel.path_for(len(wf)).startswith("numpy (IRQ_STATION_KERNEL")
        reference = extract_pulses(wf, **asked)
    return compiled, reference


@pytest.mark.parametrize(("name", "dt_ns"), [("sparse, 2.5 GS/s", 0.4), ("dense, 48 MS/s", 2.5e6 / 120_000)])
def test_the_benchmarks_records_give_the_numpy_paths_pulses_to_the_bit(name, dt_ns, monkeypatch):
    if schmitt_kernel.available() is not None:
        pytest.skip(schmitt_kernel.available())
    wf = record(3 * schmitt_kernel.MIN_SAMPLES, dt_ns, seed=7)
    for asked in ({}, {"threshold": 1.65, "hysteresis": 0.33}, {"threshold": 1.65}):
        compiled, reference = _both_paths(wf, monkeypatch, **asked)
        assert len(reference) > 5, name
        np.testing.assert_array_equal(compiled.start_s, reference.start_s)
        np.testing.assert_array_equal(compiled.width_s, reference.width_s)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(codes=hnp.arrays(st.sampled_from([np.int8, np.uint8, np.int16]), st.integers(0, 3000)),
       threshold=st.floats(-5, 5), hysteresis=st.floats(0, 2), step=st.sampled_from([0.04, -0.04, 0.001]),
       room=st.sampled_from([1, 3, schmitt_kernel.FIRST_ROOM]))
def test_garbage_codes_give_the_same_edges_on_both_paths(codes, threshold, hysteresis, step, room, monkeypatch):
    """Any codes, any threshold and hysteresis, a scale either way up (an inverted one stays on
    the numpy path): the same edges; with room for 1 or 3 transitions at first, the walk stops
    and is resumed many times."""
    if schmitt_kernel.available() is not None:
        pytest.skip(schmitt_kernel.available())
    wf = Waveform(0.0, 1e-9, codes=codes, scale=CodeScale(volts_per_code=step))
    monkeypatch.setattr(schmitt_kernel, "MIN_SAMPLES", 0)
    monkeypatch.setattr(schmitt_kernel, "FIRST_ROOM", room)
    compiled = waveform_edges(wf, threshold, hysteresis)
    with monkeypatch.context() as m:
        m.setenv("IRQ_STATION_KERNEL", "numpy")
        reference = waveform_edges(wf, threshold, hysteresis)
    for a, b in zip(compiled, reference, strict=True):
        np.testing.assert_array_equal(a, b)
