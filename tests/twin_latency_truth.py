"""The twin's t_SW distribution, exactly, from its model's parameters (station/twin/model.py's
docstring): t_SW = d_sw + t_rw + L, with L = floor + Gamma(k, θ) plus, on a fraction of the
events, an exponential tail, and d_sw a uniform delay on another fraction. Computed here by
numerical convolution on a 1 ns grid, independently of the sampling code and of the estimator
under test, so a test can hold the worst-case figures against the model's true quantiles."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import signal, stats

from station.twin.model import InterfaceParams, LatencyShape

GRID_NS = 250_000  # t_SW beyond 250 µs has probability far below 1e-12 for the presets


@dataclass(frozen=True)
class TrueLatency:
    survival: np.ndarray  # P(t_SW > x) at x = 0, 1, 2, ... ns

    @classmethod
    def of(cls, p: InterfaceParams, shape: LatencyShape) -> TrueLatency:
        x = np.arange(GRID_NS, dtype=float)
        # t_rw + floor + Gamma: t_rw's normal jitter (tens of ns) convolved in as well
        body = stats.gamma.pdf(x - shape.floor - p.t_rw, shape.shape, scale=shape.scale)
        rw = stats.norm.pdf(np.arange(-500, 501), 0.0, max(p.t_rw_jitter, 1e-9))
        body = _normalised(signal.fftconvolve(body, rw)[500:500 + GRID_NS])
        tail = _normalised(signal.fftconvolve(body, stats.expon.pdf(x, scale=p.tail_scale))[:GRID_NS])
        low, high = p.outlier_delay
        delay = stats.uniform.pdf(x, low, high - low)

        def delayed(d: np.ndarray) -> np.ndarray:
            return _normalised(signal.fftconvolve(d, delay)[:GRID_NS])

        tf, of = p.tail_fraction, p.outlier_fraction
        density = (1 - tf) * (1 - of) * body + tf * (1 - of) * tail
        if of > 0:
            density += (1 - tf) * of * delayed(body) + tf * of * delayed(tail)
        density = np.clip(density, 0.0, None)
        # P(X > x): the mass above each grid point, summed from the top (no cancellation at 1e-9)
        above = np.cumsum(density[::-1])[::-1]
        return cls(np.append(above[1:], 0.0))

    def quantile(self, p: float) -> float:
        """The latency exceeded with probability p per event (ns, to the grid's 1 ns)."""
        return float(np.argmax(self.survival <= p))


def _normalised(d: np.ndarray) -> np.ndarray:
    d = np.clip(d, 0.0, None)
    return d / d.sum()
