"""The README's demo campaign, run as a user runs it, checked against the
twin's injected ground truth and the seed's published figures."""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pandas as pd
import pytest
import test_report_browser as browser
import yaml
from scipy import stats
from scipy.special import ndtri

from station.kinds.module.data import load_run
from station.store.manifest import read_manifest
from tests.conftest import REPO, run_station
from tests.manifest_check import assert_manifests_fit

chromium = browser.chromium  # the headless browser fixture, for the figure check

SEED = yaml.safe_load((REPO / "station/twin/presets/seed-2015.yaml").read_text())
Z95 = 1.959964
# CI runs the suite once per submission: a truth-within-z·SE check may fail a correct estimator at most
# once in 1e6 runs. Over the k intervals one test checks (union bound, two-sided) that needs
# z = ndtri(1 - 1e-6 / (2 k)): 4.89 for one interval, 5.03 for two.
RISK = 1e-6


def z_for(k: int) -> float:
    """z such that k two-sided checks |estimate − truth| ≤ z·SE all pass with probability ≥ 1 − RISK."""
    return float(ndtri(1 - RISK / (2 * k)))


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "results"
    res = run_station("run", str(REPO / "configs/rtai-lpt-vs-pcie.yaml"), "--out", str(out), timeout=400)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    return out, report, res


def _run(report, iface, variant):
    (run,) = [r for r in report["runs"] if r["interface"] == iface and r["variant"] == variant]
    return run


def test_every_run_completes_with_enough_samples_and_pulses(demo):
    out, report, _ = demo
    assert len(report["runs"]) == 4
    for run in report["runs"]:
        assert run["status"] == "complete", run["error"]
        assert run["sw"]["count"] >= 100_000
        assert run["hw"]["count"] >= 5_000
        assert run["losses"]["sw_lost"] == 0
        manifest = json.loads((out / "runs" / run["id"] / "manifest.json").read_text())
        # every streamed record is in the Parquet file, byte for byte what was received
        assert manifest["counts"]["sw_records"] == run["sw"]["count"]
        # the target's own IRQ counter: an IRQ for every record, and the surplus only events the twin
        # made after the last record the station read (still in the stream when the reader stopped)
        irq = manifest["interrupts"]
        surplus = (irq["after"] - irq["before"]) - run["sw"]["count"]
        data = load_run(out / "runs" / run["id"])
        made_after = int(data.truth["seq"].max()) - int(data.sw["seq"].max())
        assert 0 <= surplus <= made_after, (surplus, made_after)


def test_every_runs_manifest_fits_its_schema_and_reads_typed(demo):
    out, report, _ = demo
    assert set(assert_manifests_fit(out).values()) == {"module"}
    for run in report["runs"]:
        raw = json.loads((out / "runs" / run["id"] / "manifest.json").read_text())
        typed = read_manifest(out / "runs" / run["id"])
        assert (typed.run_id, typed.status, typed.manifest_version) == (run["id"], "complete", 1)
        assert typed.run.model_dump() == raw["run"] and typed.extra("period_ns") == raw["period_ns"] == 100_000
        assert typed.section("losses") == raw["losses"] and typed.counts == raw["counts"]


@pytest.mark.parametrize("iface", ["lpt", "pcie"])
def test_software_statistics_match_the_preset_within_10_percent(demo, iface):
    _, report, _ = demo
    p = SEED["interfaces"][iface]
    for variant in ("inb", "no-inb"):
        sw = _run(report, iface, variant)["sw"]
        assert sw["min_ns"] == pytest.approx(p["sw_min"], rel=0.10)
        assert sw["mean_ns"] == pytest.approx(p["sw_mean"], rel=0.10)
        assert sw["std_ns"] == pytest.approx(p["sw_std"], rel=0.10)


def test_lpt_t_rw_estimate_against_the_injected_value(demo):
    out, report, _ = demo
    (est,) = [t for t in report["comparisons"]["t_rw"] if t["interface"] == "lpt"]
    # ground truth straight from the twin's event files, not from the report
    truth = pd.concat(
        [pd.read_parquet(out / "runs" / _run(report, "lpt", v)["id"] / "twin-truth.parquet") for v in ("inb",)]
    )
    injected = truth["t_rw_ns"].mean()
    assert abs(est["estimate_ns"] - injected) < 200
    # a right 95 % interval misses the truth in one run out of twenty (seen once in CI: the mean
    # 1.4 ns above it), a 99.9 % one in a thousand: the check is the same width scaled by z / 1.96,
    # z for the one interval checked here at risk 1e-6 (4.89 SE)
    lo, hi = est["ci95_ns"]
    assert abs(injected - (lo + hi) / 2) <= (hi - lo) / 2 * z_for(1) / Z95, (lo, hi, injected)
    assert est["truth_ns"] == pytest.approx(injected, abs=5)


@pytest.mark.parametrize("iface", ["lpt", "pcie"])
def test_no_inb_scope_matches_software(demo, iface):
    _, report, _ = demo
    shift = _run(report, iface, "no-inb")["shift"]["hw_minus_sw_mean_ns"]
    assert abs(shift) < 100


def test_pcie_outliers_above_the_lpt_maximum_are_counted_and_judged(demo):
    out, report, _ = demo
    (x,) = report["comparisons"]["cross_interface_outliers"]
    lpt_max = max(_run(report, "lpt", v)["sw"]["max_ns"] for v in ("inb", "no-inb"))
    assert x["threshold_ns"] == lpt_max
    # recount from the raw data
    sw = np.concatenate(
        [pd.read_parquet(out / "runs" / _run(report, "pcie", v)["id"] / "sw.parquet")["latency_ns"]
         for v in ("inb", "no-inb")]
    )
    assert x["sw_count_above"] == int((sw > lpt_max).sum()) > 0
    # the twin injected them on the software side: the scope and the board must not see them
    assert x["seen_by_scope"] is False and x["hw_count_above"] == 0
    assert x["board_count_above"] == 0
    assert "software-side" in x["verdict"]
    html = (out / "report.html").read_text()
    assert "seen by scope" in html.lower() or "scope saw" in html.lower()


def test_reports_exist_and_are_self_contained(demo):
    out, _, _ = demo
    for name in ("report.html", "report.md", "report.json", "stats.csv"):
        assert (out / name).stat().st_size > 500
    html = (out / "report.html").read_text()
    assert "http://" not in html and "https://" not in html
    assert html.count("<svg") >= 4


def test_report_regenerates_identically_from_the_data(demo, tmp_path):
    out, report, _ = demo
    res = run_station("report", str(out))
    assert res.returncode == 0, res.stderr
    again = json.loads((out / "report.json").read_text())
    assert again["runs"] == report["runs"] and again["comparisons"] == report["comparisons"]


def test_runs_analysed_side_by_side_give_the_report_of_one_at_a_time(demo, monkeypatch):
    """Runs analysed several at once (run_pool.WORKERS; threads in this multi-threaded test
    process): the report is the one analysing them one after another gives, to the last digit."""
    from station.analysis import analyse_campaign, run_pool

    out, _, _ = demo
    monkeypatch.setattr(run_pool, "WORKERS", 1)
    alone, _ = analyse_campaign(out)
    monkeypatch.setattr(run_pool, "WORKERS", 4)
    side_by_side, _ = analyse_campaign(out)
    assert json.dumps(side_by_side, sort_keys=True, default=str) == json.dumps(alone, sort_keys=True, default=str)


# A report written by a process of its own (single-threaded, as `station report` is), each run's
# analysis noting the process it ran in; `die`: the run whose worker process kills itself.
REPORT_NOTING_PIDS = """
import json, os, sys, warnings
from pathlib import Path
from station import api
from station.kinds.module import analysis as module_analysis
from station.kinds.module.run_analysis import analyse_run

campaign, pids, die = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
PARENT = os.getpid()

def noting_the_process(run_dir):
    (pids / f"{run_dir.name}.{os.getpid()}").touch()
    if run_dir.name == die and os.getpid() != PARENT:
        os._exit(9)  # as the OOM killer ends a worker: no exception, no goodbye
    return analyse_run(run_dir)

def drawing_noting_the_process(figure):
    (pids / f"draw-{figure.name}.{os.getpid()}").touch()
    return draw(figure)

module_analysis.analyse_run = noting_the_process
import station.report.figures as figures
draw, figures._draw = figures._draw, drawing_noting_the_process
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    api.write_campaign_report(campaign)
print(json.dumps({"parent": PARENT, "warnings": [str(w.message) for w in caught]}))
"""


def _report_noting_pids(demo_out, tmp_path, runs_in: str | None, die: str = ""):
    import os
    import shutil
    import sys

    campaign, pids = tmp_path / str(runs_in) / "campaign", tmp_path / str(runs_in) / "pids"
    shutil.copytree(demo_out, campaign)
    pids.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "IRQ_STATION_RUNS_IN"}
    if runs_in is not None:
        env["IRQ_STATION_RUNS_IN"] = runs_in
    res = subprocess.run([sys.executable, "-c", REPORT_NOTING_PIDS, str(campaign), str(pids), die],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    said = json.loads(res.stdout.strip().splitlines()[-1])
    where: dict[str, list[int]] = {}
    for note in pids.iterdir():
        run, pid = note.name.rsplit(".", 1)
        where.setdefault(run, []).append(int(pid))
    # report.json, report.html and the figures: the same bytes but for the directory's own path
    written = {p.relative_to(campaign).as_posix(): p.read_bytes().replace(str(campaign).encode(), b"<campaign>")
               for p in [campaign / "report.json", campaign / "report.html", *(campaign / "figures").glob("*.svg")]}
    return written, where, said


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="one core: runs are analysed one at a time")
def test_runs_analysed_in_worker_processes_give_the_report_threads_give(demo, tmp_path):
    """Forked workers (run_pool.py; forced here: the demo is below LARGE_RECORDS) analyse every run
    in processes other than the report's and draw the figures: report.json, the figures and
    report.html are, to the byte, those of threads and figures drawn in the report's process."""
    out, report, _ = demo
    in_threads, where_threads, said_threads = _report_noting_pids(out, tmp_path, "threads")
    in_processes, where_processes, said = _report_noting_pids(out, tmp_path, "processes")
    ids = {r["id"] for r in report["runs"]}
    drawings = {name for name in where_threads if name.startswith("draw-")}
    assert len(drawings) >= 10 and set(where_threads) == set(where_processes) == ids | drawings
    assert all(pids == [said_threads["parent"]] for pids in where_threads.values())
    assert all(len(pids) == 1 and pids[0] != said["parent"] for pids in where_processes.values()), where_processes
    assert len([name for name in in_threads if name.startswith("figures/")]) >= 10
    assert in_processes == in_threads
    assert said["warnings"] == said_threads["warnings"] == []


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="one core: runs are analysed one at a time")
def test_a_small_campaign_is_analysed_in_threads_and_its_figures_drawn_in_workers(demo, tmp_path):
    """Unforced, by size: the demo's 4 × 100 000 records are below LARGE_RECORDS (threads: every run
    in the report's own process), its 10 figures are DRAWN_APART or more (each in a worker)."""
    from station.kinds.module.analysis import LARGE_RECORDS
    from station.report.figures import DRAWN_APART

    out, report, _ = demo
    assert sum(r["sw"]["count"] for r in report["runs"]) < LARGE_RECORDS
    written, where, said = _report_noting_pids(out, tmp_path, None)
    drawings = [name for name in where if name.startswith("draw-")]
    assert len(drawings) >= DRAWN_APART
    assert all(where[r["id"]] == [said["parent"]] for r in report["runs"]), where
    assert all(len(where[d]) == 1 and where[d][0] != said["parent"] for d in drawings), where
    in_threads, _, _ = _report_noting_pids(out, tmp_path, "threads")
    assert written == in_threads


@pytest.mark.skipif(len(__import__("os").sched_getaffinity(0)) < 2, reason="one core: runs are analysed one at a time")
def test_a_worker_process_that_dies_loses_no_run(demo, tmp_path):
    """A worker killed mid-run (os._exit, as the OOM killer would): its run, and any queued behind
    it, are analysed in the report's own process, a warning names it, the report is the same."""
    out, report, _ = demo
    victim = sorted(r["id"] for r in report["runs"])[0]
    in_threads, _, _ = _report_noting_pids(out, tmp_path, "threads")
    after_death, where, said = _report_noting_pids(out, tmp_path, "processes", die=victim)
    assert said["parent"] in where[victim] and any(pid != said["parent"] for pid in where[victim]), where
    assert any(victim in w and "done in the station's own process" in w for w in said["warnings"]), said["warnings"]
    assert after_death == in_threads


def test_resume_skips_complete_runs(demo):
    out, _, _ = demo
    res = run_station("run", str(REPO / "configs/rtai-lpt-vs-pcie.yaml"), "--out", str(out), timeout=120)
    assert res.returncode == 0, res.stderr
    assert not list((out / "runs").glob("*.attempt-*"))


def test_event_pairing_finds_the_very_events_the_twin_injected(demo):
    out, report, _ = demo
    for run in report["runs"]:
        p = run["pairing"]
        assert p["pulses_paired"] >= 0.9 * p["pulses"], p
    # each paired pulse must be the event the twin drew: its width is that event's true width
    from station.kinds.module.data import load_run
    from station.kinds.module.pairing import pair_run

    for run in report["runs"]:
        data = load_run(out / "runs" / run["id"])
        pairing = pair_run(data.sw, data.hw, data.arrivals, data.period_ns)
        truth = data.truth.set_index("seq").loc[pairing.pairs["seq"].astype(int)]
        dt_ns = 10 * 500e-6 / 120000 * 1e9  # the demo's sample interval
        assert np.all(np.abs(pairing.pairs["hw_ns"].to_numpy() - truth["hw_ns"].to_numpy()) < dt_ns)
    estimates = report["comparisons"]["t_rw"]
    assert len(estimates) == 2  # LPT and PCIe
    for est in estimates:
        lo, hi = est["paired_ci95_ns"]
        assert hi - lo == pytest.approx(2 * Z95 * est["paired_se_ns"])
        # one shot at a 95 % interval misses 1 time in 20 by design (seen here at 2.05 and 2.4 SE):
        # the check is that the truth lies within z SE, z for the k = 2 intervals checked at risk 1e-6
        # (5.03 SE)
        z = z_for(len(estimates))
        assert abs(est["paired_estimate_ns"] - est["truth_ns"]) <= z * est["paired_se_ns"], est
        assert abs(est["paired_estimate_ns"] - est["truth_ns"]) < 5


# --- the report leads with the answer, and reads as a first reader wants it (issue 12) -------------

def _findings(report, kind, **match):
    return [f for f in report["findings"] if f["kind"] == kind and all(f.get(k) == v for k, v in match.items())]


def test_findings_paragraph_comes_first(demo):
    out, report, _ = demo
    kinds = [f["kind"] for f in report["findings"]]
    assert kinds.index("faster") < kinds.index("t_rw") < kinds.index("outliers") < kinds.index("worst_case")
    html = (out / "report.html").read_text()
    body = html[html.index("</header>"):]
    # the first section after the header is the findings paragraph, every sentence in it, in order
    assert body.index('<section id="findings">') < body.index("<section", body.index('<section id="findings">') + 1)
    assert body.index('id="findings"') < min(body.index(s) for s in ('id="warnings"', 'id="comparisons"', 'id="runs"')
                                             if s in body)
    from markupsafe import escape

    from station.common.formatting import readable

    positions = [body.index(str(escape(readable(f["text"])))) for f in report["findings"]]
    assert positions == sorted(positions)
    # a bullet each, as every kind's findings (not one long paragraph)
    section = body[body.index('<section id="findings">'):body.index("</section>", body.index('id="findings"'))]
    assert section.count("<li ") == len(report["findings"]) and "<p class=\"findings\"" not in section
    md = (out / "report.md").read_text()
    assert md.index("## Findings") < md.index("## Comparisons") < md.index("## Runs")


def test_the_first_page_answers_at_a_glance(demo, chromium, tmp_path):
    """Issue 30: a short sentence per finding with the figure that backs it in bold, computed from the
    report's own numbers; the two figures that answer the question (who is faster, where the outliers
    are) under the findings, before any table; at 1280 px the findings need no horizontal scrolling,
    the answering figures start within the first 1400 px and their text is ≥ 10 px."""
    from markupsafe import escape

    from station.common.formatting import count_text, us

    out, report, _ = demo
    for f in report["findings"]:
        assert f["headline"] and f["figure"] and len(f["headline"].split()) <= 30, f
    backed = {
        "faster": lambda f: [us(v["estimate_ns"]) for v in f["values"].values()],
        "t_rw": lambda f: [us(f["t_rw_ns"])],
        # no reliable fit: the distribution-free bound, i.e. the observed maximum; else the estimate
        "worst_case": lambda f: [us(v["observed_max_ns"]) if "no reliable" in f["headline"]
                                 else us(v["quantile_ns"]["estimate"]) for v in f["interfaces"].values()
                                 if "no reliable" in f["headline"] or v["quantile_ns"]],
    }
    for f in report["findings"]:
        for number in backed.get(f["kind"], lambda f: [])(f):
            assert number in f["figure"], (number, f["figure"])
        if f.get("criterion") == "above_reference_max":
            assert f["figure"] == f"{count_text(f['sw_count_above'])} of {count_text(f['sw_total'])}"
    html = (out / "report.html").read_text()
    section = html[html.index('<section id="findings">'):html.index("</section>", html.index('id="findings"'))]
    for f in report["findings"]:
        assert f"<strong>{escape(f['figure'])}</strong>" in section
    glance = re.findall(r'<figure id="fig-([^"]+)"', section)
    assert [g.split("-")[0] for g in glance] == ["sw", "ccdf"], glance
    assert all(html.count(f'id="fig-{g}"') == 1 for g in glance)  # shown once: not again under Figures
    md = (out / "report.md").read_text()
    first_table = md.index("\n| ")
    assert all(md.index(f"figures/{g}.svg") < first_table for g in glance)
    assert all(f"**{f['figure']}**" in md[:first_table] for f in report["findings"])

    page = tmp_path / "glance.html"
    page.write_text(html.replace("</body>", GLANCE_PROBE + "</body>"))
    dom = subprocess.run([chromium, *browser.FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                          "--window-size=1280,1400", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=180).stdout
    probe = json.loads(re.search(r'<p id="glance">([^<]*)</p>', dom).group(1).replace("&quot;", '"'))
    assert probe["findings_overflow"] <= 0, probe
    assert probe["figure_top"] < 1400 and probe["smallest_text"] >= 10.0, probe


GLANCE_PROBE = """<script>
const ul = document.querySelector("ul.findings");
const fig = document.querySelector("#findings figure");
const sizes = [];
for (const svg of document.querySelectorAll("#findings figure svg")) {
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  for (const t of svg.querySelectorAll("text")) sizes.push(parseFloat(getComputedStyle(t).fontSize) * scale);
}
const out = {findings_overflow: Math.max(ul.scrollWidth - ul.clientWidth,
                                         ul.getBoundingClientRect().right - document.documentElement.clientWidth),
             figure_top: fig.getBoundingClientRect().top + window.scrollY, smallest_text: Math.min(...sizes)};
const p = document.createElement("p");
p.id = "glance";
p.textContent = JSON.stringify(out);
document.body.append(p);
</script>"""


def test_faster_interface_agrees_with_the_report_and_the_injected_truth(demo):
    out, report, _ = demo
    from station.common.formatting import us

    # the truth: the median of the latencies the twin logged it made, per interface (not the report's copy
    # of its preset, which is the product's output)
    logged = {}
    for iface in ("lpt", "pcie"):
        parts = [pd.read_parquet(out / "runs" / r["id"] / "twin-truth.parquet", columns=["sw_ns", "stray"])
                 for r in report["runs"] if r["interface"] == iface]
        truth = pd.concat(parts)
        logged[iface] = float(np.median(truth.loc[~truth["stray"], "sw_ns"]))
    truly_faster = min(logged, key=logged.get)
    (median,) = _findings(report, "faster", percentile="p50")
    assert median["faster"] == truly_faster == "pcie"
    assert median["text"].startswith("Under load seed-io, PCIe is faster than LPT at the median")
    for iface, v in median["values"].items():
        runs = [r for r in report["runs"] if r["interface"] == iface]
        # the pooled median lies between the runs' own medians (± the 1 ns of the bucket rule)
        p50s = [r["sw"]["percentiles_ns"]["p50"] for r in runs]
        assert min(p50s) - 1 <= v["estimate_ns"] <= max(p50s) + 1
        lo, hi = v["ci95_ns"]
        # issue 46: the runs are the units (was: the pooled events' i.i.d. interval, < 50 ns wide, which
        # two runs of one condition on a bench fall outside of): Student's t over the runs' own medians
        m, se = np.mean(p50s), np.std(p50s, ddof=1) / np.sqrt(len(p50s))
        t = stats.t.ppf(0.975, len(p50s) - 1)
        assert lo == pytest.approx(m - t * se, abs=1e-6) and hi == pytest.approx(m + t * se, abs=1e-6)
        assert lo <= v["estimate_ns"] <= hi and v["runs"] == len(runs) == 2
        assert v["count"] == sum(r["sw"]["count"] for r in runs)
        assert f"{us(v['estimate_ns'])} µs [{us(lo)}, {us(hi)}]" in median["text"]
    (tail,) = _findings(report, "faster", percentile="p99.99")
    assert "p99.99" in tail["text"] and all(v["reliable"] for v in tail["values"].values())


def test_t_rw_explains_the_inb_difference_as_injected(demo):
    out, report, _ = demo
    from station.common.formatting import us

    for est in report["comparisons"]["t_rw"]:
        (f,) = _findings(report, "t_rw", interface=est["interface"])
        assert f["t_rw_ns"] == est["estimate_ns"] and f["t_rw_ci95_ns"] == est["ci95_ns"]
        # t_rw = Δt_HW − Δt_SW: the finding's numbers are the report's, recombined
        assert f["hw_difference_ns"] - f["sw_difference_ns"] == pytest.approx(est["estimate_ns"], abs=1e-6)
        # the twin adds t_rw to the pulse only: the explanation must be found
        # the twin adds t_rw to the pulse only: the inb check must never be credited with a latency
        # change; one run per variant (the demo's) either explains the difference or says it cannot
        # tell the runs' own latency difference from run-to-run variation (issue 46)
        assert "changes the latency itself" not in f["headline"] and not f["runs_as_units"]
        assert ("t_rw explains the difference" in f["text"]) if f["explained"] else \
            ("cannot tell from run-to-run variation" in f["text"])
        # the scope's difference is t_rw plus the two runs' own latency difference, which on a bench (and
        # the twin since issue 46: each module load has its own machine state) is not zero: the truth of
        # both from the twin's event files, over the records each shift compares its pulses with (those
        # of the scope's capture window, which the manifest names by event number: the estimand's
        # definition, not an estimate)
        def window_mean(run_id: str) -> float:
            t = pd.read_parquet(out / "runs" / run_id / "twin-truth.parquet", columns=["seq", "sw_ns", "stray"])
            own = t[~t["stray"].astype(bool)].sort_values("seq")
            event = np.arange(len(own))  # the module's own events, in order: seq less the strays before
            cap = json.loads((out / "runs" / run_id / "manifest.json").read_text())["capture"]
            inside = (event >= cap["first_event"]) & (event <= cap["last_event"])
            return float(own["sw_ns"].to_numpy()[inside].mean())

        sw_truth = window_mean(est["inb_run"]) - window_mean(est["no_inb_run"])
        assert abs(f["sw_difference_ns"] - sw_truth) < 30
        assert abs(f["hw_difference_ns"] - est["truth_ns"] - sw_truth) < 100
        assert f"t_rw is {us(est['estimate_ns'])} µs" in f["text"]


def test_outlier_and_worst_case_findings(demo):
    _, report, _ = demo
    from station.common.formatting import count_text, us

    (cross,) = _findings(report, "outliers", criterion="above_reference_max")
    x = report["comparisons"]["cross_interface_outliers"][0]
    assert f"{count_text(x['sw_count_above'])} of {count_text(x['sw_total'])} PCIe software samples" in cross["text"]
    assert "PCIE" not in cross["text"] and "software-side" in cross["text"]
    (worst,) = _findings(report, "worst_case")
    for c in report["comparisons"]["worst_case"]:
        assert f"{us(c['observed_max_ns'])} µs" in worst["text"]
    # without a tail estimate, a maximum ranks nothing
    assert "one draw" in worst["text"] and "faster" not in worst["text"]


def test_twin_preset_is_a_table_with_units_and_the_override_marked(demo):
    out, report, _ = demo
    demo_config = yaml.safe_load((REPO / "configs/rtai-lpt-vs-pcie.yaml").read_text())
    assert report["campaign"]["twin"]["overrides"] == demo_config["bench"]["twin"]["overrides"]
    html = (out / "report.html").read_text()
    header = html[:html.index("</header>")]
    assert "{'" not in header and '{"' not in header and "overridden by the campaign: PCIe outlier_fraction" in header
    table = html[html.index('id="table-twin_preset"'):]
    table = table[:table.index("</table>")]
    row = table[table.index(">outlier_fraction</td>"):]
    row = row[:row.index("</tr>")]
    assert row.count("flag-override") == 1 and "5.0e-05" in row and ">fraction</td>" in row
    assert ">µs</td>" in table and "2.000" in table  # LPT t_rw 2000 ns, shown in µs
    assert "Twin preset seed-2015" in (out / "report.md").read_text()


def test_casing_counts_and_outlier_names(demo):
    out, report, _ = demo
    from station.common.formatting import count_text

    for name in ("report.html", "report.md"):
        text = (out / name).read_text()
        assert "PCIE" not in text
        assert "Outliers SW / HW" not in text
        assert "Robust outliers (&gt; median + 8·MAD)" in text or "Robust outliers (> median + 8·MAD)" in text
        assert "maximum (the seed's criterion)" in text or "maximum (the seed&#39;s criterion)" in text
        x = report["comparisons"]["cross_interface_outliers"][0]
        assert f"of {count_text(x['sw_total'])} PCIe software samples" in text
        for run in report["runs"]:  # per-run IRQ counts from the manifest
            irq = run["interrupts"]
            assert count_text(irq["after"] - irq["before"]) in text
    assert "<th scope=\"col\">IRQs</th>" in (out / "report.html").read_text()


def test_figure_axes_say_what_they_hold(demo):
    out, _, _ = demo
    for svg in (out / "figures").glob("sw-hist-*.svg"):
        assert "software latency t_SW (µs)" in svg.read_text()
    for svg in (out / "figures").glob("scope-variants-*.svg"):
        text = svg.read_text()
        assert "pulse width t_HW (µs)" in text and ">latency (µs)<" not in text
    for svg in (out / "figures").glob("*.svg"):
        assert "n=100,0" not in svg.read_text()  # counts grouped as in the tables: 100 044


def test_figure_text_readable_and_legends_beside_the_data(demo, chromium, tmp_path):
    """At a 1400 px window every figure text is ≥ 12 px tall and no legend covers an axes."""
    out, _, _ = demo
    page = tmp_path / "probe.html"
    page.write_text((out / "report.html").read_text().replace("</body>", FIGURE_PROBE + "</body>"))
    dom = subprocess.run([chromium, *browser.FLAGS, f"--user-data-dir={tmp_path / 'profile'}",
                          "--window-size=1400,2000", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                         capture_output=True, text=True, timeout=180).stdout
    smallest = float(re.search(r'<p id="smallest">([0-9.]+)</p>', dom).group(1))
    assert int(re.search(r'<p id="texts">(\d+)</p>', dom).group(1)) > 100
    assert smallest >= 12.0, smallest
    assert not re.findall(r'<p class="overlap">([^<]*)</p>', dom)


# Run in the page by the browser (a copy of the report: the report itself has no script): the smallest
# rendered figure text in px, and each figure whose legend box overlaps its axes box.
FIGURE_PROBE = """<script>
const sizes = [];
for (const svg of document.querySelectorAll("figure svg")) {
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  for (const t of svg.querySelectorAll("text")) sizes.push(parseFloat(getComputedStyle(t).fontSize) * scale);
  const legend = svg.querySelector('g[id^="legend"]');
  const axes = svg.querySelector('g[id^="axes"] > g[id^="patch"]');
  if (legend && axes) {
    const a = axes.getBoundingClientRect(), b = legend.getBoundingClientRect();
    const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
    const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (w > 1 && h > 1) {  // built as an element: the dumped DOM holds this script's text too
      const p = document.createElement("p");
      p.className = "overlap";
      p.textContent = svg.getAttribute("aria-label");
      document.body.append(p);
    }
  }
}
document.body.insertAdjacentHTML("beforeend",
  `<p id="smallest">${Math.min(...sizes)}</p><p id="texts">${sizes.length}</p>`);
</script>"""


def _same(a, b, path: str = "") -> list[str]:
    """Where two report dictionaries differ: ints, strings and structure exactly, floats to 1e-9."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in _same(a[k], b[k], f"{path}/{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _same(x, y, f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, float):
        return [] if a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b)) else [f"{path}: {a!r} vs {b!r}"]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def test_the_analysis_does_not_depend_on_how_the_runs_are_read_in_batches(demo, monkeypatch):
    """Runs are read a batch at a time (memory bounded for hour-long runs): cutting them into
    batches of 999 records — every acquisition and pairing block cut somewhere else — must give
    the same report as the default batches did."""
    from station.analysis.campaign import analyse_campaign
    from station.kinds.module import data as module_data

    out, report, _ = demo
    monkeypatch.setattr(module_data, "BATCH_ROWS", 999)
    small, _ = analyse_campaign(out)
    small = json.loads(json.dumps(small, default=float))  # as report.json holds it
    differences = [d for d in _same(report["runs"], small["runs"], "runs")
                   + _same(report["comparisons"], small["comparisons"], "comparisons")]
    assert not differences, differences[:10]


def test_the_set_up_compiles_the_kernels_a_report_uses(demo, tmp_path):
    """The set-up's warm-up (`station warm-up`, run by scripts/bootstrap.sh) leaves numba's
    cache holding the very signatures a report calls: the report of the demo campaign then loads
    every compiled kernel it uses from the cache and compiles none (numba's own cache log says
    which, NUMBA_DEBUG_CACHE), so a new user's first report does not pay the compiler."""
    import os
    import shutil

    cache = tmp_path / "numba-cache"
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache), NUMBA_DEBUG_CACHE="1")
    warmed = subprocess.run([str(REPO / ".venv/bin/station"), "warm-up"], env=env, capture_output=True,
                            text=True, timeout=300)
    assert warmed.returncode == 0, warmed.stderr
    assert "data saved" in warmed.stdout
    assert "pairing choice: ready" in warmed.stdout and "pairing spreads: ready" in warmed.stdout
    assert "pairing agreement: ready" in warmed.stdout
    campaign = tmp_path / "demo"
    shutil.copytree(demo[0], campaign)
    report = subprocess.run([str(REPO / ".venv/bin/station"), "report", str(campaign)], env=env,
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr
    log = report.stdout + report.stderr
    loaded = set(re.findall(r"data loaded from '.*/(\w+)\._build\.locals\.(\w+)-", log))
    assert {("pairing_scores", "choice_compiled"), ("clock_ratio", "ratios")} <= loaded, log[-2000:]
    assert "data saved" not in log  # nothing compiled: every signature was in the cache
