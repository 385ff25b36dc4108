"""Seed 004's deadline view on cyclictest runs: how often each target × case reached the
deadline, counted from cyclictest's own histogram and held against a count made here from the
JSON file itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy import stats

from station import api
from station.analysis.campaign import analyse_campaign
from station.config import parse_campaign
from station.importers import ImportOptions

SOURCE = Path(__file__).parent / "fixtures" / "cyclictest" / "rt-tests-2.8" / "q-h100-b40-t2-a" / "out.json"


def _imported(tmp_path: Path, deadline: str) -> dict:
    dump = tmp_path / "board-none.json"
    dump.write_bytes(SOURCE.read_bytes())
    out = tmp_path / "out"
    api.import_results([dump], out, ImportOptions(target="board", load="none"), report=False)
    config = parse_campaign(f"name: x\nmatrix: {{kind: cyclictest, duration: 10s, loads: [none]}}\n"
                            f"report: {{deadline: {deadline}}}\nloads: {{none: []}}\n"
                            "bench: {target: {kind: local}}\n").model_dump(mode="json")
    campaign = json.loads((out / "campaign.json").read_text())
    (out / "campaign.json").write_text(json.dumps({**campaign, "config": config}))
    return analyse_campaign(out)[0]["cyclictest"]


@pytest.mark.parametrize("deadline_us", [20, 30, 50, 99, 100])  # 30us is 29.999999999999996e-6 s
def test_reaching_the_deadline_is_counted_from_the_histogram(tmp_path: Path, deadline_us: int) -> None:
    section = _imported(tmp_path, f"{deadline_us}us")
    (cell,) = section["deadline_view"]
    threads = json.loads(SOURCE.read_text())["thread"].values()
    # cycles past the 100 µs histogram are above any deadline below it
    cycles = sum(t["cycles"] for t in threads)
    above = sum(sum(n for b, n in t["histogram"].items() if int(b) >= deadline_us)
                + t["cycles"] - sum(t["histogram"].values()) for t in threads)
    assert (cell["cycles"], cell["above"]) == (cycles, above)
    assert cell["p_exceed"] == pytest.approx(above / cycles)
    lo = stats.beta.ppf(0.025, above, cycles - above + 1) if above else 0.0
    assert cell["ci_low"] == pytest.approx(lo) and cell["ci_low"] <= above / cycles <= cell["ci_high"]


def test_the_page_shows_the_deadline_table(tmp_path: Path) -> None:
    section = _imported(tmp_path, "50us")
    from station.kinds.cyclictest.tables import deadline_table

    table = deadline_table(section)
    assert table is not None and "50 µs" in table.title
    assert [c.text for c in table.rows[0][:2]] == ["board", "none"]


def test_report_deadline_option_reaches_an_imported_cyclictest_run(tmp_path: Path) -> None:
    from tests.conftest import run_station

    dump = tmp_path / "board-none.json"
    dump.write_bytes(SOURCE.read_bytes())
    out = tmp_path / "out"
    api.import_results([dump], out, ImportOptions(target="board", load="none"), report=False)
    proc = run_station("report", str(out), "--deadline", "30us")
    assert proc.returncode == 0, proc.stderr
    section = json.loads((out / "report.json").read_text())["cyclictest"]
    (cell,) = section["deadline_view"]
    assert section["deadline_us"] == 30 and cell["deadline_us"] == 30
    assert "Deadline 30 µs" in (out / "report.md").read_text()
