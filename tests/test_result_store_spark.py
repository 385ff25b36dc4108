"""The result store read by Spark, for real: a campaign of every kind in one lab directory, the
queries of docs/result-store.md (that file's own text) run in DuckDB and in a local Spark session,
the same figures from both (exact for counts, minima and maxima; 1e-9 relative for means and
percentiles), and the report's. Needs Java 17 and pyspark (scripts/ci/spark-deps.sh, the test
extras): without them this skips saying so, except under CI, where it fails."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
import yaml

from station import api
from tests.conftest import REPO, missing, run_station
from tests.test_avr_sketch import require_sketch_tools

DOC = (REPO / "docs" / "result-store.md").read_text()
EVERY_TABLE = DOC[DOC.index("## Every table in both engines"):]
QUERIES = re.findall(r"```sql\n(.*?)```", EVERY_TABLE, re.S)
SPARK_VIEWS = re.search(r"<!-- spark-views -->\n```python\n(.*?)```", DOC, re.S).group(1)
LOCAL = {"kind": "local"}

CAMPAIGNS = {
    "module": {"bench": {"target": {"kind": "twin", "family": "rtai"}, "twin": {"preset": "seed-2015", "seed": 7},
                         "scope": {"kind": "twin", "channel": 1, "volts_per_div": "1V", "position_div": -3,
                                   "time_per_div": "500us", "record_length": 120000, "trigger_level": "1.5V",
                                   "bus": "loopback"}},
               "matrix": {"interfaces": ["lpt", "pcie"], "variants": ["inb"], "samples": 5000, "pulses": 500,
                          "max_duration": "2min"}},
    "cyclictest": {"bench": {"target": LOCAL, "scope": {"kind": "none"}},
                   "matrix": {"kind": "cyclictest", "duration": "2s", "max_duration": "1min"},
                   "cyclictest": {"interval": "1ms", "histogram": "2ms"}},
    "interruptions": {"bench": {"target": LOCAL, "scope": {"kind": "none"}},
                      "matrix": {"kind": "interruptions", "duration": "2s", "max_duration": "1min"},
                      "interruptions": {"cpu": "last", "threshold": "2us", "trace": "auto"}},
    "avrsim": {"bench": {"target": LOCAL},
               "matrix": {"kind": "avrsim", "samples": 2000, "max_duration": "1min"},
               "avrsim": {"cases": {"sketch": {"firmware": "sketch"}, "bare": {"firmware": "responder"}}}},
}


def gpio_campaign() -> dict:
    """configs/gpio-response-pi.yaml, two cases, idle only, 200 stimuli a run."""
    cfg = yaml.safe_load((REPO / "configs" / "gpio-response-pi.yaml").read_text())
    cfg["gpio"]["cases"] = {k: cfg["gpio"]["cases"][k] for k in ("kernel", "sysfs")}
    cfg["matrix"] |= {"loads": ["idle"], "samples": 200}
    cfg["loads"] = {"idle": []}
    return cfg


@pytest.fixture(scope="module")
def spark():
    if not shutil.which("java"):
        missing("no Java runtime (scripts/ci/spark-deps.sh installs openjdk-17-jre-headless)")
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        missing("pyspark is not installed (pip install -e .[test])")
    session = (SparkSession.builder.master("local[1]").appName("irq-station-store")
               .config("spark.ui.enabled", "false").config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.sql.shuffle.partitions", "1")
               .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    require_sketch_tools()
    lab = tmp_path_factory.mktemp("lab")
    for kind, cfg in {**CAMPAIGNS, "gpio": gpio_campaign()}.items():
        cfg = {"name": f"store-{kind}", **{k: v for k, v in cfg.items() if k not in ("name", "description")}}
        path = lab.parent / f"{kind}.yaml"
        path.write_text(yaml.safe_dump(cfg))
        res = run_station("run", str(path), "--out", str(lab / kind), timeout=600)
        assert res.returncode == 0, (kind, res.stdout[-2000:], res.stderr[-2000:])
    return lab


def _rows(result: list, columns: list[str], groups: int) -> dict[tuple, dict]:
    """Rows keyed by their group (the first `groups` columns: each query selects them first),
    values by column name."""
    out = {}
    for row in result:
        values = dict(zip(columns, row, strict=True))
        key = tuple(row[:groups])
        assert key not in out, key
        out[key] = values
    return out


def _same(a, b, column: str) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    a, b = float(a), float(b)
    if column.startswith(("mean", "avg", "median", "p99")):  # aggregates in floating point
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0)
    return a == b


def test_the_docs_queries_give_the_same_figures_in_duckdb_and_spark(lab, spark):
    assert len(QUERIES) == 6
    store = api.open_results(sorted(d for d in lab.iterdir() if d.is_dir()))
    store.register()
    scope: dict = {}
    exec(SPARK_VIEWS, scope)  # the doc's own code registers Spark's views
    registered = scope["register_spark_views"](spark, str(lab))
    assert set(registered) >= {"sw", "hw", "cyclictest_histogram", "interruptions_gaps", "delays", "avrsim_edges"}
    for query in QUERIES:
        duck = store.con.sql(query)
        columns = duck.columns
        groups = len(re.search(r"GROUP BY (.*)", query).group(1).split(","))
        ours = _rows(duck.fetchall(), columns, groups)
        theirs = _rows([tuple(r) for r in spark.sql(query).collect()], columns, groups)
        assert ours, query  # every table has rows: every kind ran
        assert ours.keys() == theirs.keys(), query
        for key, row in ours.items():
            for column, value in row.items():
                assert _same(value, theirs[key][column], column), (query.splitlines()[0], key, column, value,
                                                                    theirs[key][column])


def _report(lab: Path, kind: str) -> dict:
    return json.loads((lab / kind / "report.json").read_text())


def test_the_stores_figures_are_the_reports(lab, spark):
    scope: dict = {}
    exec(SPARK_VIEWS, scope)
    scope["register_spark_views"](spark, str(lab))

    def spark_rows(query: str) -> dict[str, tuple]:
        return {r[0]: tuple(r[1:]) for r in spark.sql(query).collect()}

    # module runs: each run's own t_SW, count and maximum as its report has them
    sw = spark_rows("SELECT run_id, count(*), min(latency_ns), max(latency_ns) FROM sw_own GROUP BY run_id")
    for run in _report(lab, "module")["runs"]:
        assert sw[run["id"]] == (run["sw"]["count"], run["sw"]["min_ns"], run["sw"]["max_ns"]), run["id"]
    # cyclictest: the histogram holds every cycle a thread measured but its overflows
    hist = spark_rows("SELECT run_id, sum(count) FROM cyclictest_histogram GROUP BY run_id")
    for run in _report(lab, "cyclictest")["cyclictest"]["runs"]:
        assert hist[run["id"]] == (sum(t["cycles"] - t["overflows"] for t in run["threads"]),)
    # the detector: every gap of the run
    gaps = spark_rows("SELECT run_id, count(*) FROM interruptions_gaps GROUP BY run_id")
    for run in _report(lab, "interruptions")["interruptions"]["runs"]:
        assert gaps.get(run["id"], (0,)) == (run["gaps"],), run["id"]
    # gpio: the answered stimuli
    answered = spark_rows("SELECT run_id, count(delay_s) FROM delays GROUP BY run_id")
    for run in _report(lab, "gpio")["gpio"]["runs"]:
        assert answered[run["id"]] == (run["answered"],), run["id"]
    # avrsim: every edge, and the slowest answer in cycles
    edges = spark_rows("SELECT run_id, count(*), max(resp_cycle - stim_cycle) FROM avrsim_edges GROUP BY run_id")
    for run in _report(lab, "avrsim")["avrsim"]["runs"]:
        assert edges[run["id"]] == (run["stimuli"], run["delay_cycles"]["max"]), run["id"]
