"""The twin renders a segmented acquisition's frames in a few array operations (it must keep up
with a thousand frames every 100 ms); each frame must be what rendering it alone gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from instruments.sim.signal import LogicSignal


@st.composite
def frames_and_pulses(draw):  # noqa: ANN001, ANN201
    n = draw(st.integers(1, 60))
    dt = draw(st.floats(0.5, 40.0))
    count = draw(st.integers(1, 8))
    ramp = draw(st.one_of(st.just(0.0), st.floats(0.01, 30.0)))  # 10-90 % rise, ns
    fall = draw(st.one_of(st.just(0.0), st.floats(0.01, 30.0)))
    # frames apart by more than a ramp (a segmented scope re-arms for a microsecond), or closer
    # (rendered frame by frame then)
    gaps = draw(st.lists(st.floats(max(ramp, fall) / 0.8 + 1.0, 5000.0) | st.floats(0.0, 40.0),
                         min_size=count, max_size=count))
    t0 = np.cumsum([0.0, *[(n - 1) * dt + g for g in gaps[:-1]]]) + draw(st.floats(-100.0, 100.0))
    end = t0[-1] + n * dt + 200.0
    anywhere = draw(st.lists(st.floats(-300.0, float(end)), max_size=8))
    # edges within a ramp of a frame's first or last sample: where frames meet their neighbours
    # (or on a sample exactly: the step and its ramp must fall on the same sample as alone)
    near = [float(t0[draw(st.integers(0, count - 1))] + dt * draw(st.integers(0, n - 1))
                  + draw(st.just(0.0) | st.floats(-40.0, 40.0))) for _ in range(draw(st.integers(0, 4)))]
    leads = sorted(anywhere + near)
    widths = draw(st.lists(st.floats(0.1, 3000.0), min_size=len(leads), max_size=len(leads)))
    pulses = np.array([[a, a + w] for a, w in zip(leads, widths, strict=True)]).reshape(-1, 2)
    return LogicSignal((0.0, 3.3), ramp * 1e-9, fall * 1e-9, 0.0), pulses, t0, dt, n


@settings(max_examples=300, deadline=None)
@given(frames_and_pulses())
def test_each_frame_renders_as_it_would_alone(case) -> None:  # noqa: ANN001
    signal, pulses, t0, dt, n = case
    rng = np.random.default_rng(0)
    together = signal.render_frames(pulses, t0, dt, n, rng)
    assert together.shape == (len(t0), n)
    for f, start in enumerate(t0):
        alone = signal.render(pulses, float(start), dt, n, rng)
        np.testing.assert_allclose(together[f], alone, atol=1e-9, err_msg=f"frame {f}")


def test_noise_is_drawn_for_every_sample_of_every_frame() -> None:
    signal = LogicSignal((0.0, 3.3), 15e-9, None, 0.05)
    volts = signal.render_frames(np.empty((0, 2)), np.arange(200) * 2000.0, 10.0, 500, np.random.default_rng(1))
    assert volts.shape == (200, 500)
    assert abs(volts.std() - 0.05) < 0.002 and abs(volts.mean()) < 0.002
    assert len(np.unique(volts)) == volts.size  # no frame repeats another's noise
