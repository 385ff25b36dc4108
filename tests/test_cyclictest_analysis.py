"""The analysis of cyclictest run directories made of real cyclictest output (the captured
fixtures): one truncated output does not lose the run when the other one holds it, and
the table takes the worst thread of complete runs only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from station.kinds.cyclictest import analysis as cyclictest

FIXTURE = Path(__file__).parent / "fixtures/cyclictest/rt-tests-2.4/q-h50-t-a"


def _run_dir(tmp_path: Path, name: str, status: str = "complete", target: str = "a", load: str = "x") -> Path:
    run = tmp_path / "runs" / name
    run.mkdir(parents=True)
    shutil.copy(FIXTURE / "stdout.txt", run / "cyclictest.out")
    shutil.copy(FIXTURE / "out.json", run / "cyclictest.json")
    (run / "manifest.json").write_text(json.dumps({
        "run_id": name, "status": status, "error": None if status == "complete" else "stopped",
        "run": {"target": target, "load": load, "repetition": 0}}))
    return run


def test_a_truncated_json_leaves_the_text_and_says_so(tmp_path):
    whole = cyclictest.read_outputs(_run_dir(tmp_path, "whole"))
    run = _run_dir(tmp_path, "torn")
    data = (run / "cyclictest.json").read_bytes()
    (run / "cyclictest.json").write_bytes(data[: len(data) // 2])
    out = cyclictest.read_outputs(run)
    assert out.json is None and out.text is not None
    assert out.problems and out.problems[0].startswith("cyclictest.json")
    assert [(t.index, t.min, t.max, t.cycles) for t in out.threads] == [
        (t.index, t.min, t.max, t.cycles) for t in whole.threads]


def test_the_table_takes_the_worst_thread_of_complete_runs(tmp_path):
    good = _run_dir(tmp_path, "a-x-r0")
    _run_dir(tmp_path, "a-y-r0", status="interrupted", load="y")
    section, samples, notes = cyclictest.analyse_runs(
        sorted((tmp_path / "runs").iterdir()), {"config": {"bench": {"targets": {"a": {}}},
                                                           "matrix": {"loads": ["x", "y"]}}})
    own = json.loads((good / "cyclictest.json").read_text())
    assert section["table"]["max_latency_us"]["a"] == {"x": max(t["max"] for t in own["thread"].values()),
                                                       "y": None}
    assert "y" in section["table"]["problems"]["a"]
    assert any("a-y-r0 is interrupted" in n for n in notes)
    assert {h.label for h in samples["a-x-r0"].histograms} == {
        f"thread {i} (CPU {t['cpu']})" for i, t in own["thread"].items()}
