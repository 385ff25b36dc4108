"""What the probe sees: pulses -> an analog logic signal -> 8-bit digitizer levels.

Times are float64 ns relative to an anchor chosen by the caller (absolute
source-clock values can exceed 1e15 ns, where float64 has no sub-ns room).
An edge's time is its 50 % point, so the width at mid-level equals fall - rise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEVELS_PER_DIV = 25  # TDS digitizer: 25 levels per vertical division, 0 at centre screen
CODE_MIN, CODE_MAX = -128, 127
RAMP_10_90 = 0.8  # a linear ramp spends 80 % of its duration between 10 % and 90 %


@dataclass
class LogicSignal:
    """A logic line: idle and active levels, finite edges, Gaussian noise.

    `levels` is (idle, active): (0, 3.3) for an active-high pin, (3.3, 0) for an
    active-low one. `rise_time_s` (10-90 %) applies to the leading edge of each
    pulse and `fall_time_s` (default: the same) to the trailing edge.
    """

    levels: tuple[float, float] = (0.0, 3.3)
    rise_time_s: float = 15e-9
    fall_time_s: float | None = None
    noise_v: float = 0.02

    def ramp_ns(self, leading: bool) -> float:
        """Full 0-100 % duration of a linear edge."""
        t = self.rise_time_s if leading or self.fall_time_s is None else self.fall_time_s
        return max(t, 0.0) / RAMP_10_90 * 1e9

    def crossings(self, pulses_ns: np.ndarray, level_v: float, rising_volts: bool) -> np.ndarray:
        """Times at which edges of the given voltage direction cross `level_v`."""
        idle, active = self.levels
        leading = (active > idle) == rising_volts  # which pulse edge moves the voltage that way
        start, end = (idle, active) if leading else (active, idle)
        if start == end:
            return np.empty(0)
        frac = (level_v - start) / (end - start)
        if not 0.0 < frac < 1.0:
            return np.empty(0)  # the level is outside the swing: this edge never crosses it
        edge = pulses_ns[:, 0] if leading else pulses_ns[:, 1]
        return edge + (frac - 0.5) * self.ramp_ns(leading)

    def render(
        self,
        pulses_ns: np.ndarray,
        t0_ns: float,
        dt_ns: float,
        n: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Volts at t0 + k·dt (k < n) for pulses given as rows [lead, trail] in ns."""
        idle, active = self.levels
        t = t0_ns + dt_ns * np.arange(n, dtype=np.float64)
        frac = np.zeros(n)
        if len(pulses_ns):
            p = pulses_ns[np.argsort(pulses_ns[:, 0])]
            lead, trail = p[:, 0].astype(np.float64), np.sort(p[:, 1].astype(np.float64))
            # ideal steps at the 50 % points, then a correction near each edge for the ramp
            frac += np.searchsorted(lead, t, side="right") - np.searchsorted(trail, t, side="right")
            self._add_ramps(frac, lead, +1.0, self.ramp_ns(True), t0_ns, dt_ns)
            self._add_ramps(frac, trail, -1.0, self.ramp_ns(False), t0_ns, dt_ns)
            np.clip(frac, 0.0, 1.0, out=frac)
        volts = idle + (active - idle) * frac
        if self.noise_v > 0:
            volts += rng.normal(0.0, self.noise_v, n)
        return volts

    def render_frames(
        self,
        pulses_ns: np.ndarray,
        t0_ns: np.ndarray,
        dt_ns: float,
        n: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Volts of frames of n samples, frame f at t0_ns[f] + k·dt, as an (F, n) array: what
        `render` gives frame by frame, in a few array operations for all of them (a segmented
        acquisition has a thousand frames; the twin must keep up with the pulses in real time).

        `t0_ns` is increasing and frames are apart by more than an edge's ramp, so each edge
        shapes at most one frame. Pulses are rows [lead, trail] on the frames' time axis.
        """
        idle, active = self.levels
        frames = len(t0_ns)
        t0 = np.asarray(t0_ns, np.float64)
        ramp = max(self.ramp_ns(True), self.ramp_ns(False))
        # frames closer than a ramp or a sample: an edge could shape two frames; one at a time then
        if frames > 1 and np.min(np.diff(t0)) - (n - 1) * dt_ns <= max(ramp, dt_ns):
            return np.stack([self.render(pulses_ns, float(t), dt_ns, n, rng) for t in t0])
        frac = np.zeros(frames * n)
        if len(pulses_ns) and frames:
            lead = np.sort(pulses_ns[:, 0].astype(np.float64))
            trail = np.sort(pulses_ns[:, 1].astype(np.float64))
            # ideal steps at the 50 % points: a sample counts the edges at or before it; an edge's
            # first sample is found per frame (its frame: the last one starting at or before it)
            steps = np.zeros(frames * n + 1)
            for edges, sign in ((lead, 1.0), (trail, -1.0)):
                f = np.searchsorted(t0, edges, side="right") - 1
                start = t0[np.maximum(f, 0)]
                k = np.ceil((edges - start) / dt_ns)
                # the first k with start + dt·k >= edge as `render` computes the sample times:
                # the division can round either way for an edge on a sample
                k -= (k >= 1) & (start + dt_ns * (k - 1) >= edges)
                k += start + dt_ns * k < edges
                first = np.where(f < 0, 0, np.where(k >= n, (f + 1) * n, f * n + np.maximum(k, 0)))
                np.add.at(steps, first.astype(np.int64), sign)
            frac = np.cumsum(steps[:-1])
            self._add_frame_ramps(frac, t0, lead, +1.0, self.ramp_ns(True), dt_ns, n)
            self._add_frame_ramps(frac, t0, trail, -1.0, self.ramp_ns(False), dt_ns, n)
            np.clip(frac, 0.0, 1.0, out=frac)
        volts = idle + (active - idle) * frac
        if self.noise_v > 0:
            volts += rng.normal(0.0, self.noise_v, frames * n)
        return volts.reshape(frames, n)

    @staticmethod
    def _add_frame_ramps(frac: np.ndarray, t0: np.ndarray, edges: np.ndarray, sign: float,
                         ramp: float,
                         dt: float, n: int) -> None:
        """`_add_ramps` over frames laid end to end in `frac` (frame f's samples from f·n)."""
        if ramp <= 0 or not len(edges):
            return
        f = np.maximum(np.searchsorted(t0, edges + ramp / 2, side="right") - 1, 0)
        k0 = np.ceil((edges - ramp / 2 - t0[f]) / dt).astype(np.int64)
        span = int(np.ceil(ramp / dt)) + 1
        idx = k0[:, None] + np.arange(span)[None, :]
        x = t0[f][:, None] + idx * dt - edges[:, None]
        corr = np.clip(x / ramp + 0.5, 0.0, 1.0) - (x >= 0)
        ok = (idx >= 0) & (idx < n)
        np.add.at(frac, (f[:, None] * n + idx)[ok], sign * corr[ok])

    @staticmethod
    def _add_ramps(frac: np.ndarray, edges: np.ndarray, sign: float, ramp: float, t0: float,
                   dt: float) -> None:
        if ramp <= 0 or not len(edges):
            return
        n = len(frac)
        k0 = np.ceil((edges - ramp / 2 - t0) / dt).astype(np.int64)
        span = int(np.ceil(ramp / dt)) + 1
        idx = k0[:, None] + np.arange(span)[None, :]
        x = t0 + idx * dt - edges[:, None]
        corr = np.clip(x / ramp + 0.5, 0.0, 1.0) - (x >= 0)
        ok = (idx >= 0) & (idx < n)
        np.add.at(frac, idx[ok], sign * corr[ok])


def digitize(volts: np.ndarray, volts_per_div: float, position_div: float,
             offset_v: float = 0.0) -> np.ndarray:
    """Volts -> int8 levels as a Tektronix digitizer: 25 per division, clipped at -128/127.

    `offset_v` is subtracted before the position is added (MSO: CH<n>:OFFSet, CH<n>:POSition).
    """
    levels = np.rint(((volts - offset_v) / volts_per_div + position_div) * LEVELS_PER_DIV)
    return np.clip(levels, CODE_MIN, CODE_MAX).astype(np.int8)
