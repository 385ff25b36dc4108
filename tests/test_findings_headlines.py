"""The first page's headlines say what the entries behind them say (issue 30): the probability the
campaign asked for, and the counts of every run a headline speaks for."""

from __future__ import annotations

from station.kinds.module import findings


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
