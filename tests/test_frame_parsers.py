"""Parsers and extraction for segmented acquisitions: FastFrame time stamps in both forms the
MSO families send, InfiniiVision time-tag lists, and pulses found across frames end to end
(a pulse cut by a frame's edge, or made by joining two frames, is no pulse). Garbage gets a
ScopeDataError naming the reply's part, nothing else."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from instruments.keysight_infiniivision import _time_tags
from instruments.pulses import extract_frame_pulses
from instruments.scope import CodeScale, Frames, ScopeDataError
from instruments.tektronix_mso import parse_time_stamps


def test_both_stamp_forms_give_picosecond_differences_across_a_day_boundary():
    old = '"31 Dec 2025 23:59:59.999 999 999 999","01 Jan 2026 00:00:00.000 000 000 001"'
    new = "1: 31.12.2025.23:59:59.999999999999, 2: 01.01.2026.00:00:00.000000000001"
    for reply in (old, new):
        t = parse_time_stamps(reply)
        assert t[0] == 0.0 and t[1] == pytest.approx(2e-12, abs=1e-15)
    # an hour apart: exact up to the float64 spacing at 3600 s (0.45 ps), not lost in a sum of large times
    t = parse_time_stamps("1: 01.01.2026.00:00:00.000000000000, 2: 01.01.2026.01:00:00.000000000007")
    assert t[1] - 3600.0 == pytest.approx(7e-12, abs=5e-13)


@pytest.mark.parametrize("reply", ["", "garbage", '"02 Foo 2026 12:00:00.1"', "1: 99.99.2026.12:00:00.1",
                                   "1: 02.03.2026.12:00:00.1234567890123"])
def test_bad_stamps_name_the_stamp(reply):
    with pytest.raises(ScopeDataError) as info:
        parse_time_stamps(reply)
    assert "TIMEStamp" in str(info.value)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_stamp_garbage_is_a_data_error_or_a_valid_list(reply):
    try:
        t = parse_time_stamps(reply)
    except ScopeDataError:
        return
    assert t.dtype == np.float64 and np.all(np.isfinite(t)) and t[0] == 0.0


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_time_tag_garbage_is_a_data_error_or_finite_tags(reply):
    try:
        tags = _time_tags(reply)
    except ScopeDataError:
        return
    assert len(tags) and np.all(np.isfinite(tags))


def test_time_tags_in_a_block_and_bare():
    text = "+0.000000000E+00,+1.000370000E-04"
    assert _time_tags(f"#8{len(text):08d}{text}").tolist() == [0.0, 1.00037e-4]
    assert _time_tags(text).tolist() == [0.0, 1.00037e-4]


def _frames(rows: list[list[int]], trigger_s: list[float], dt: float = 1e-6) -> Frames:
    codes = np.array(rows, dtype=np.int8)
    return Frames(-2 * dt, dt, codes, CodeScale(volts_per_code=0.1), np.array(trigger_s))


def test_pulses_cut_by_a_frame_edge_or_made_by_joining_frames_are_dropped():
    lo, hi = 0, 33
    frames = _frames([
        [lo, lo, hi, hi, hi, lo, lo, lo],  # a whole pulse: rises between samples 1-2, falls 4-5
        [hi, hi, lo, lo, hi, hi, hi, hi],  # starts inside a pulse (cut), ends inside another (cut)
        [lo, lo, lo, hi, hi, lo, lo, lo],  # a whole pulse after the previous frame's high end
    ], trigger_s=[0.0, 1e-4, 3e-4])
    p = extract_frame_pulses(frames, threshold=1.65)
    assert p.frame.tolist() == [0, 2]
    np.testing.assert_allclose(p.width_s, [3e-6, 2e-6])
    # start: each frame's own trigger, its sample 0 at t0 (-2 samples), the crossing's position
    np.testing.assert_allclose(p.start_s, [0.0 - 2e-6 + 1.5e-6, 3e-4 - 2e-6 + 2.5e-6])
