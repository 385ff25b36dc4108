"""`station monitor`'s figures in the Prometheus text format (docs/lab.md "Prometheus"): an HTTP
endpoint on the schedule's `prometheus.listen` (127.0.0.1 unless another address is written) and/or
a node-exporter textfile, through the official client library.

Per target host and phase: the latest cycle's window maxima (one series per window of the cycle,
so that every window's maximum is scraped, not only the last one a phase wrote), windows measured
and windows missed (gaps) as counters, the regression verdict and its p-value, the time of the last
measured window, the phase's `max` budget (its campaign's `budgets:`), the schedule's period, the
kernel release as a label, and a cyclictest phase's long-term histogram as a Prometheus histogram.

The figures are made once each time the ledger grows (`update`), never on a scrape: a scrape reads
a snapshot (the long-term histogram reads every window's runs)."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from station.monitor.ledger import Entry
from station.monitor.schedule import Schedule

PREFIX = "irq_station"
# the long-term histogram's bucket bounds (µs): cyclictest's 1 µs buckets counted below each
BUCKETS_US = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000,
              100_000)


def host_of_phases(entries: list[Entry]) -> dict[str, str]:
    """Each phase's target host: the latest it was measured on (a gap before any window ran has
    no host of its own: "unknown")."""
    out: dict[str, str] = {}
    for e in sorted(entries, key=lambda e: e.started):
        if e.status != "gap" or e.target != "target":
            out[e.phase] = e.target
    return out


def _cumulative(rows: list[tuple[float, int]],
                beyond: int = 0) -> tuple[list[tuple[str, float]], float, int]:
    """cyclictest's bucket k µs holds latencies in [k, k + 1) µs: it is under a bound b when
    k + 1 ≤ b; `beyond` cycles above the histogram's range are in +Inf alone (and the count, not
    the sum). (buckets, sum of the buckets' floors in seconds, count)."""
    buckets, total = [], sum(n for _, n in rows) + beyond
    for bound in BUCKETS_US:
        buckets.append((repr(bound / 1e6), float(sum(n for lat, n in rows if lat + 1 <= bound))))
    buckets.append(("+Inf", float(total)))
    return buckets, sum(lat * n for lat, n in rows) * 1e-6, total


class MonitorMetrics:
    """A prometheus_client collector over the monitor's ledger snapshot."""

    def __init__(self, schedule: Schedule, anchor: float | None = None) -> None:
        self.schedule = schedule
        self.anchor = anchor  # the schedule's start: a phase's "last good window" before its first
        self._families: list[Any] = []
        self._lock = threading.Lock()

    def update(self, entries: list[Entry], histograms: dict[str, list[tuple[float, int]]],
               verdicts: dict[str, dict[str, Any]],
               budgets: dict[str, tuple[str, float]] | None = None,
               overflows: dict[str, int] | None = None) -> None:
        """budgets: phase -> its tightest `max` budget (op, s); overflows: phase -> cycles
        beyond its cyclictest histogram's range (in the +Inf bucket only)."""
        budgets, overflows = budgets or {}, overflows or {}
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        hosts = host_of_phases(entries)
        labels = ["host", "phase"]
        window_max = GaugeMetricFamily(
            f"{PREFIX}_window_max_seconds", "each window's latency maximum, the phase's latest "
            "cycle (window: its number in the cycle)", labels=[*labels, "window", "kernel"])
        cycle = GaugeMetricFamily(f"{PREFIX}_cycle", "the latest cycle with a measured window",
                                  labels=labels)
        measured = CounterMetricFamily(f"{PREFIX}_windows", "windows measured", labels=labels)
        gaps = CounterMetricFamily(f"{PREFIX}_window_gaps", "windows missed (gaps: the target "
                                   "did not answer, a run failed)", labels=labels)
        regression = GaugeMetricFamily(f"{PREFIX}_regression", "1 when the latest cycle is a "
                                       "regression against the phase's history (docs/lab.md)",
                                       labels=labels)
        p_value = GaugeMetricFamily(f"{PREFIX}_regression_p_value", "the rank test's p-value "
                                    "(NaN: no verdict yet)", labels=labels)
        last_good = GaugeMetricFamily(f"{PREFIX}_last_good_window_timestamp_seconds",
                                      "when the latest measured window ended (the schedule's "
                                      "start while none has)", labels=labels)
        period = GaugeMetricFamily(f"{PREFIX}_cycle_period_seconds", "the schedule's `every`",
                                   labels=labels)
        budget = GaugeMetricFamily(f"{PREFIX}_max_budget_seconds", "the phase campaign's tightest "
                                   "`max` budget (budgets:), op its comparison (<= or <)",
                                   labels=[*labels, "op"])
        kernel = GaugeMetricFamily(f"{PREFIX}_kernel_info", "the target's kernel release "
                                   "(uname -r) in its latest window", labels=["host", "kernel"])
        latency = HistogramMetricFamily(f"{PREFIX}_latency_seconds", "every window's cyclictest "
                                        "histogram summed, its overflows in +Inf (sum: of the 1 "
                                        "µs buckets' floors)", labels=labels)
        kernels: dict[str, tuple[float, str]] = {}
        for phase in [p.name for p in self.schedule.phases]:
            mine = [e for e in entries if e.phase == phase]
            key = [hosts.get(phase, "unknown"), phase]
            ran = [e for e in mine if e.status != "gap" and e.max_ns is not None]
            measured.add_metric(key, len(ran))
            gaps.add_metric(key, sum(e.status == "gap" for e in mine))
            period.add_metric(key, self.schedule.every)
            if phase in budgets:
                op, limit = budgets[phase]
                budget.add_metric([*key, op], limit)
            if ran:
                latest = max(e.cycle for e in ran)
                cycle.add_metric(key, latest)
                for e in sorted((e for e in ran if e.cycle == latest), key=lambda e: e.window):
                    window_max.add_metric([*key, str(e.window), e.kernel or ""],
                                          e.max_ns * 1e-9)  # type: ignore[operator]
                last_good.add_metric(key, max(e.ended for e in ran))
            elif self.anchor is not None:  # never measured: silent since the schedule began
                last_good.add_metric(key, self.anchor)
            for e in ran:  # the host's kernel: its latest measured window's, whichever phase
                if e.kernel and e.started >= kernels.get(key[0], (-math.inf, ""))[0]:
                    kernels[key[0]] = (e.started, e.kernel)
            v = verdicts.get(phase) or {}
            regression.add_metric(key, 1.0 if v.get("verdict") == "regression" else 0.0)
            p = v.get("p_value")
            p_value.add_metric(key, math.nan if p is None else float(p))
            if rows := histograms.get(phase):
                buckets, total, _ = _cumulative(rows, overflows.get(phase, 0))
                latency.add_metric(key, buckets, total)
        for host, (_, release) in sorted(kernels.items()):
            kernel.add_metric([host, release], 1.0)
        with self._lock:
            self._families = [window_max, cycle, measured, gaps, regression, p_value, last_good,
                              period, budget, kernel, latency]

    def collect(self) -> Iterator[Any]:
        with self._lock:
            families = list(self._families)
        yield from families

    def describe(self) -> Iterator[Any]:  # the registry asks once: no snapshot needed for that
        return iter(())


class Exporter:
    """The endpoint and the textfile a monitor keeps up to date."""

    def __init__(self, schedule: Schedule, store: Path, textfile: Path | None,
                 anchor: float | None = None) -> None:
        from prometheus_client import CollectorRegistry

        self.settings = schedule.prometheus
        self.store, self.textfile = Path(store), textfile
        self.metrics = MonitorMetrics(schedule, anchor)
        self._overflows: dict[str, int] = {}  # a campaign directory's, read once
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.metrics)
        self._server: Any = None

    def start(self) -> None:
        from prometheus_client import start_http_server

        if self.settings is not None and self.settings.listen is not None:
            host, port = self.settings.address()
            self._server = start_http_server(port, host, registry=self.registry)

    def update(self, entries: list[Entry], verdicts: dict[str, dict[str, Any]],
               budgets: dict[str, tuple[str, float]]) -> None:
        from station.monitor.overview import long_term_histogram

        try:
            histograms = long_term_histogram(self.store, entries)
        except Exception:  # noqa: BLE001 - the other figures are still worth exporting
            histograms = {}
        overflows: dict[str, int] = {}
        for phase, rel in {(e.phase, e.campaign_dir) for e in entries
                           if e.campaign_dir and e.status != "gap"}:
            overflows[phase] = overflows.get(phase, 0) + self._overflows_of(rel)
        self.metrics.update(entries, histograms, verdicts, budgets, overflows)
        if self.textfile is not None:
            from prometheus_client import write_to_textfile

            self.textfile.parent.mkdir(parents=True, exist_ok=True)
            write_to_textfile(str(self.textfile), self.registry)  # written whole, then renamed

    def _overflows_of(self, rel: str) -> int:
        """The cycles beyond the histogram's range of a campaign's cyclictest runs (its report)."""
        if rel not in self._overflows:
            import json

            try:
                report = json.loads((self.store / rel / "report.json").read_text())
                runs = (report.get("cyclictest") or {}).get("runs") or []
                self._overflows[rel] = sum(int(t.get("overflows") or 0) for r in runs
                                           for t in r.get("threads") or [])
            except (OSError, ValueError, TypeError, AttributeError):
                return 0  # not written yet, or torn: asked again next time
        return self._overflows[rel]

    def stop(self) -> None:
        if self._server is not None:
            server, _thread = self._server
            server.shutdown()
            server.server_close()
            self._server = None
