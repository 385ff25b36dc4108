"""Outliers within a run, and the seed's cross-interface criterion: samples of
one interface above the other interface's software maximum, and whether the
scope (and the board, where it timestamps every event) saw them too."""

from __future__ import annotations

import numpy as np
import pandas as pd

ROBUST_Z = 8.0


def robust_threshold(values: np.ndarray, z: float = ROBUST_Z) -> float:
    v = np.asarray(values, dtype=np.float64)
    med = np.median(v)
    mad = np.median(np.abs(v - med)) * 1.4826
    if mad == 0:  # more than half the sample on one value (coarse quantisation): fall back to the std
        mad = float(v.std())
    return float(med + z * mad) if mad > 0 else float("inf")


def run_outliers(sw_ns: np.ndarray, hw_ns: np.ndarray | None) -> dict:
    sw_thr = robust_threshold(sw_ns)
    out = {
        "method": f"robust z-score: above median + {ROBUST_Z:g}·1.4826·MAD of the same sample",
        "sw_threshold_ns": sw_thr,
        "sw_count": int(np.sum(sw_ns > sw_thr)),
        "hw_threshold_ns": None,
        "hw_count": 0,
    }
    if hw_ns is not None and len(hw_ns) > 10:
        hw_thr = robust_threshold(hw_ns)
        out["hw_threshold_ns"] = hw_thr
        out["hw_count"] = int(np.sum(hw_ns > hw_thr))
    return out


def cross_interface(
    interface: str,
    reference: str,
    threshold_ns: float,
    sw_ns: np.ndarray,
    hw_ns: np.ndarray,
    board_ns: np.ndarray | None,
    board_of_sw_outliers_ns: np.ndarray | None,
    scope_caught: pd.DataFrame | None = None,
) -> dict:
    above = int(np.sum(sw_ns > threshold_ns))
    frac = above / len(sw_ns) if len(sw_ns) else 0.0
    hw_above = int(np.sum(hw_ns > threshold_ns))
    expected_in_scope = frac * len(hw_ns)
    seen = hw_above > 0
    result = {
        "interface": interface,
        "reference_interface": reference,
        "threshold_ns": float(threshold_ns),
        "sw_count_above": above,
        "sw_total": int(len(sw_ns)),
        "sw_fraction": frac,
        "hw_count_above": hw_above,
        "hw_total": int(len(hw_ns)),
        "hw_expected_if_real": expected_in_scope,
        "seen_by_scope": seen,
        "board_count_above": None if board_ns is None else int(np.sum(board_ns > threshold_ns)),
        "board_total": None if board_ns is None else int(len(board_ns)),
        "board_max_of_sw_outliers_ns": (
            None if board_of_sw_outliers_ns is None or len(board_of_sw_outliers_ns) == 0
            else float(np.max(board_of_sw_outliers_ns))
        ),
    }
    result["scope_caught"] = (
        [] if scope_caught is None else
        [{"run": r.run, "seq": int(r.seq), "sw_ns": float(r.sw_ns), "hw_ns": float(r.hw_ns)}
         for r in scope_caught.itertuples()]
    )
    result["verdict"] = _verdict(result)
    return result


def _verdict(r: dict) -> str:
    ref, iface = r["reference_interface"].upper(), r["interface"].upper()
    if r["sw_count_above"] == 0:
        return f"No {iface} software sample exceeded the {ref} maximum."
    parts = [
        f"{r['sw_count_above']} of {r['sw_total']} {iface} software samples "
        f"({r['sw_fraction']:.1e}) exceeded the {ref} maximum."
    ]
    if r["seen_by_scope"]:
        parts.append(f"The scope saw {r['hw_count_above']} pulse(s) above it too: the delay is on the wire.")
    elif r["hw_expected_if_real"] >= 3:
        parts.append(
            f"The scope saw none in {r['hw_total']} pulses where {r['hw_expected_if_real']:.1f} were expected "
            "if they were real: they are software-side (between timestamp and write)."
        )
    else:
        parts.append(
            f"The scope saw none, but its {r['hw_total']} pulses would hold only "
            f"{r['hw_expected_if_real']:.2f} such events: the scope alone cannot tell."
        )
    if r["scope_caught"]:
        widths = ", ".join(f"{c['hw_ns'] / 1000:.2f}" for c in r["scope_caught"])
        above = sum(c["hw_ns"] > r["threshold_ns"] for c in r["scope_caught"])
        parts.append(
            f"Event pairing found {len(r['scope_caught'])} of those very events in the scope's records, "
            f"with pulse widths {widths} µs: {above} above the threshold"
            + (" — the scope saw a normal pulse where software saw a late one." if above == 0 else ".")
        )
    if r["board_max_of_sw_outliers_ns"] is not None:
        verdict = "below" if r["board_max_of_sw_outliers_ns"] <= r["threshold_ns"] else "above"
        parts.append(
            f"The board's own timestamps for those same events give widths up to "
            f"{r['board_max_of_sw_outliers_ns'] / 1000:.2f} µs, {verdict} the threshold"
            + (": the pulse itself was normal, the delay is software-side." if verdict == "below" else ".")
        )
    return " ".join(parts)
