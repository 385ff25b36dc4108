"""The first page's headlines say what the entries behind them say (issue 30): the probability the
campaign asked for, and the counts of every run a headline speaks for."""

from __future__ import annotations

import json

import pytest

from station.kinds.module import findings
from tests.conftest import run_station


def test_the_worst_case_headline_names_the_probability_asked_even_without_an_estimate() -> None:
    # too few samples for a fit: no quantile at all, only the distribution-free bound
    entry = {"interface": "lpt", "load": "io", "exceedance": 1e-6, "quantile_ns": None, "reliable": False,
             "reasons": ["only 500 samples: at least 1000 are needed for a tail fit"],
             "bound": {"bound_ns": 13_000.0, "one_in": 167.4, "exceedance": 0.006, "level": 0.95},
             "observed_max_ns": 13_000.0, "p99_999_ns": 12_900.0}
    f = findings._worst_case([entry], "io")
    assert "once in 1,000,000 events" in f["headline"], f["headline"]
    assert f["figure"] == "LPT 13.000 µs (1 in 167)"


def test_a_robust_outlier_headline_counts_every_run_it_speaks_for() -> None:
    sentence = "2 of the 30 000 paired events are outliers: too few to tell the side"
    runs = [{"id": f"pcie-{v}", "outlier_verdict": {"sentence": sentence, "sw_outliers": n, "hw_outliers": h}}
            for v, n, h in (("inb", 11, 0), ("no-inb", 6, 2))]
    (f,) = findings._run_outliers(runs)
    assert f["runs"] == ["pcie-inb", "pcie-no-inb"]
    assert f["figure"] == "17 software, 2 scope"


# ---- one source for a headline and its text, with and without a scope (issue 47.6) --------------
CAMPAIGN = """name: sides
bench:
  target: {{kind: twin, family: rtai}}
  twin:
    seed: 476
    overrides:
      pcie: {{outlier_fraction: 2.0e-3, outlier_delay: [40000, 60000]}}
  scope: {scope}
matrix:
  interfaces: [lpt, pcie]
  variants: [no-inb]
  loads: [none]
  period: 100us
  samples: 20000{pulses}
  max_duration: 2min
loads:
  none: []
"""
SCOPE = ("{kind: twin, channel: 1, volts_per_div: 1V, position_div: -3, time_per_div: 1ms, record_length: 120000, "
         "trigger_level: 1.5V, threshold: auto, bus: loopback}")
# the reading of the scope each cross-interface side stands for, as the headline and the text put it
SIDE_WORDS = {"no scope": ("no scope", "No scope measured"), "seen by the scope": ("saw them too", "saw"),
              "software-side": ("software-side", "software-side"), "cannot tell": ("cannot tell", "cannot tell"),
              "board: software-side": ("board's widths were normal: software-side", "the delay is software-side"),
              "board: on the wire": ("board's widths were long too", "above the threshold")}


@pytest.mark.parametrize("scope", ["none", "twin"])
def test_the_outlier_headlines_say_what_their_text_says_and_never_count_an_absent_scope(tmp_path, scope) -> None:
    """PCIe software delays injected at 2e-3 (far above LPT's largest latency): on a campaign without
    a scope no headline, figure or field may show a scope figure (0 is a measurement), and each
    outlier headline's reading of the scope is its text's; with the twin's scope the same holds."""
    (tmp_path / "c.yaml").write_text(CAMPAIGN.format(scope="{kind: none}" if scope == "none" else SCOPE,
                                                     pulses="" if scope == "none" else "\n  pulses: 2000"))
    res = run_station("run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "out"), timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    [cross] = report["comparisons"]["cross_interface_outliers"]
    assert cross["sw_count_above"] > 0  # the injected delays are above LPT's maximum
    if scope == "none":  # PCIe's twin board times its pulses (clock_hz): its widths tell the side
        assert cross["side"] == "board: software-side"
        assert cross["seen_by_scope"] is None and cross["hw_total"] is None and cross["hw_count_above"] is None
        assert all(r["outlier_verdict"]["hw_outliers"] is None for r in report["runs"])
    else:
        assert cross["side"] in ("seen by the scope", "software-side", "cannot tell")
    for f in report["findings"]:
        if f["kind"] != "outliers":
            continue
        if scope == "none":
            assert "0 scope" not in f["figure"] and "saw none" not in f["headline"], f
        if f.get("criterion") == "above_reference_max":
            head, text = SIDE_WORDS[cross["side"]]
            assert head in f["headline"] and text in f["text"], f
        else:  # a run's robust verdict: its figure counts the scope only where there was one
            assert ("no scope" in f["figure"]) == (scope == "none") or f["figure"] == "none", f
