"""cyclictest's --json file (rt-tests 2.0 on): read strictly, duplicate keys refused, the
invalid JSON some versions write (NaN, unescaped quotes) repaired and said so."""

from __future__ import annotations

import json
import math
import re
from typing import Any

from station.parsers.cyclictest.model import (
    _SHORT_WITH_ARG,
    _UINT,
    HIST_MAX,
    MAX_BUCKET,
    MAX_COUNT,
    MAX_THREADS,
    CyclictestOutputError,
    CyclictestReport,
    CyclictestThread,
    SysInfo,
)

# ---------------------------------------------------------------------------------- JSON

_BAD_NUMBER = re.compile(r"(:[ \t]*)-?(?:nan|inf(?:inity)?)\b", re.IGNORECASE)
_STRING_LINE = re.compile(r'^([ \t]*"[^"\\\n]*"[ \t]*:[ \t]*")(.*)("[ \t]*,?[ \t]*)$')


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    d: dict[str, Any] = {}
    for k, v in pairs:
        if k in d:
            raise CyclictestOutputError(f"duplicate key {k[:40]!r}")
        d[k] = v
    return d


def _loads(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_no_duplicates)


def _repair(text: str) -> tuple[str, list[str]]:
    """Fix what cyclictest itself gets wrong: unescaped strings (the command line) and NaN."""
    repairs = []
    out = []
    for ln in text.split("\n"):
        m = _STRING_LINE.match(ln)
        if m:
            try:
                json.loads('"' + m.group(2) + '"')
            except ValueError:
                ln = m.group(1) + json.dumps(m.group(2), ensure_ascii=False)[1:-1] + m.group(3)
                repairs.append(f"escaped the string of {m.group(1).strip()[:-1].strip()}")
        out.append(ln)
    fixed, k = _BAD_NUMBER.subn(r"\1null", "\n".join(out))
    if k:
        repairs.append(f"read {k} nan/inf number(s) as null")
    return fixed, repairs


def _path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if re.fullmatch(r"[A-Za-z0-9_:]+",
                                             key) else f"{parent}[{json.dumps(key)}]"


def _get(obj: dict, key: str, parent: str, kind: type | tuple[type, ...], *,
         optional: bool = False) -> Any:
    if key not in obj:
        if optional:
            return None
        raise CyclictestOutputError(f"missing key {key!r}", path=parent)
    v = obj[key]
    ok = (type(v) is int) if kind is int else isinstance(v, kind) and not isinstance(v, bool)
    if not ok:
        raise CyclictestOutputError(f"{type(v).__name__} where {getattr(kind, '__name__', kind)} "
                                    "belongs",
                                    path=_path(parent, key))
    return v


def _bounded(v: int, path: str, lo: int, hi: int) -> int:
    if not lo <= v <= hi:
        raise CyclictestOutputError(f"{v} is out of range ({lo}..{hi})", path=path)
    return v


def _either(obj: dict, keys: tuple[str, str], parent: str) -> str:
    present = [k for k in keys if k in obj]
    if len(present) != 1:
        raise CyclictestOutputError(f"expected one of the keys {keys}", path=parent)
    return _get(obj, present[0], parent, str)


def _atoi(s: str) -> int:
    m = re.match(r"\s*([+-]?[0-9]{1,12})", s, re.ASCII)
    return int(m.group(1)) if m else 0


def histogram_option(cmdline: str) -> int | None:
    """The -h/-H/--histogram/--histofall value of a cyclictest command line (the last one, as
    cyclictest takes it, clamped to its HIST_MAX), or None. The line's quoting is lost: best
    effort."""
    toks = cmdline.split()
    hist = None
    i = 1
    while i < len(toks):
        tok = toks[i]
        i += 1
        if tok == "--":
            break
        if tok.startswith("--"):
            name, eq, val = tok[2:].partition("=")
            if name in ("histogram", "histofall"):
                if not eq:
                    if i >= len(toks):
                        break
                    val, i = toks[i], i + 1
                hist = _atoi(val)
        elif tok.startswith("-") and len(tok) > 1:
            for j in range(1, len(tok)):
                c = tok[j]
                if c in _SHORT_WITH_ARG:
                    val = tok[j + 1 :]
                    if not val and i < len(toks):
                        val, i = toks[i], i + 1
                    if c in "hH":
                        hist = _atoi(val)
                    break
    return min(hist, HIST_MAX) if hist is not None and hist > 0 else None


def parse_json(data: str | bytes) -> CyclictestReport:
    """Parse the file of ``cyclictest --json=FILE`` (rt-tests 2.0 and later)."""
    if isinstance(data, bytes | bytearray | memoryview):
        try:
            text = bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise CyclictestOutputError(f"not UTF-8 (byte {e.start})",
                                        line=bytes(data)[: e.start].count(b"\n") + 1) from None
    elif isinstance(data, str):
        text = data
    else:
        raise TypeError(f"cyclictest JSON must be str or bytes, not {type(data).__name__}")
    repairs: list[str] = []
    try:
        doc = _loads(text)
    except CyclictestOutputError:
        raise
    except (ValueError, RecursionError) as first:
        fixed, repairs = _repair(text)
        try:
            if not repairs:
                raise
            doc = _loads(fixed)
        except CyclictestOutputError:
            raise
        except (ValueError, RecursionError):
            if isinstance(first, json.JSONDecodeError):
                raise CyclictestOutputError(f"not JSON: {first.msg} (column {first.colno})",
                                            line=first.lineno) from None
            raise CyclictestOutputError(
                f"not JSON: {str(first)[:80] or type(first).__name__}"
            ) from None
    return _report(doc, tuple(repairs))


def _report(doc: Any, repairs: tuple[str, ...]) -> CyclictestReport:
    if not isinstance(doc, dict):
        raise CyclictestOutputError(f"{type(doc).__name__} where the object belongs", path="$")
    cmdline = _either(doc, ("cmdline:", "cmdline"), "$")
    version = _either(doc, ("rt_test_version:", "rt_test_version"), "$")
    si = _get(doc, "sysinfo", "$", dict)
    realtime = _get(si, "realtime", "$.sysinfo", int)
    sysinfo = SysInfo(
        release=_get(si, "release", "$.sysinfo", str), version=_get(si, "version", "$.sysinfo",
                                                                    str),
        realtime=bool(_bounded(realtime, "$.sysinfo.realtime", 0, 1)),
        sysname=_get(si, "sysname", "$.sysinfo", str, optional=True),
        nodename=_get(si, "nodename", "$.sysinfo", str, optional=True),
        machine=_get(si, "machine", "$.sysinfo", str, optional=True),
    )
    n = _bounded(_get(doc, "num_threads", "$", int), "$.num_threads", 0, MAX_THREADS)
    res = _get(doc, "resolution_in_ns", "$", int)
    # it is the -N flag; 1000 read as "µs" should a version write the unit
    if res not in (0, 1, 1000):
        raise CyclictestOutputError(f"{res}: expected 0 or 1 (the -N flag)",
                                    path="$.resolution_in_ns")
    nsecs = res == 1
    unit = 1 if nsecs else 1000
    hist_range = histogram_option(cmdline)
    tobj = _get(doc, "thread", "$", dict)
    want = {str(i) for i in range(n)}
    if set(tobj) != want:
        odd = sorted(set(tobj) ^ want, key=lambda k: (len(k), k))[:3]
        raise CyclictestOutputError(f"thread keys must be 0..{n - 1} (num_threads {n}); odd: {odd}",
                                    path="$.thread")
    threads = tuple(_json_thread(tobj[str(i)], i, f"$.thread.{i}", unit,
                                 hist_range) for i in range(n))
    return CyclictestReport(
        file_version=_bounded(_get(doc, "file_version", "$", int), "$.file_version", 1, 10**6),
        cmdline=cmdline, rt_test_version=version,
        start_time=_get(doc, "start_time", "$", str), end_time=_get(doc, "end_time", "$", str),
        return_code=_bounded(_get(doc, "return_code", "$", int), "$.return_code", -(2**31),
                             2**31 - 1),
        sysinfo=sysinfo, num_threads=n, nsecs=nsecs, unit_ns=unit, histogram_range=hist_range,
        threads=threads, repairs=repairs,
    )


def _json_thread(t: Any, index: int, path: str, unit: int,
                 hist_range: int | None) -> CyclictestThread:
    if not isinstance(t, dict):
        raise CyclictestOutputError(f"{type(t).__name__} where an object belongs", path=path)
    cycles = _bounded(_get(t, "cycles", path, int), f"{path}.cycles", 0, MAX_COUNT)
    tmin = _bounded(_get(t, "min", path, int), f"{path}.min", -MAX_COUNT, MAX_COUNT)
    tmax = _bounded(_get(t, "max", path, int), f"{path}.max", -MAX_COUNT, MAX_COUNT)
    if "avg" not in t:
        raise CyclictestOutputError("missing key 'avg'", path=path)
    avg = t["avg"]
    if avg is not None and (type(avg) not in (int, float) or not math.isfinite(avg)):
        if type(avg) is float:  # a NaN spelled the JSON way
            avg = None
        else:
            raise CyclictestOutputError(f"{type(avg).__name__} where a number belongs",
                                        path=f"{path}.avg")
    cpu = _bounded(_get(t, "cpu", path, int), f"{path}.cpu", -1, 2**31 - 1)
    node = _bounded(_get(t, "node", path, int), f"{path}.node", -1, 2**31 - 1)
    hobj = _get(t, "histogram", path, dict, optional=True)
    buckets: list[int] = []
    counts: list[int] = []
    if hobj is not None:
        hpath = f"{path}.histogram"
        items = []
        for k, v in hobj.items():
            if not _UINT.fullmatch(k) or int(k) > MAX_BUCKET:
                raise CyclictestOutputError(f"bucket {k[:40]!r} is not an index 0..{MAX_BUCKET}",
                                            path=hpath)
            if type(v) is not int or not 0 <= v <= MAX_COUNT:
                raise CyclictestOutputError(f"count {str(v)[:40]} out of range", path=_path(hpath,
                                                                                            k))
            if v:
                items.append((int(k), v))
        items.sort()
        if any(a[0] == b[0] for a, b in zip(items, items[1:], strict=False)):
            raise CyclictestOutputError("a bucket appears twice", path=hpath)
        buckets = [b for b, _ in items]
        counts = [c for _, c in items]
    if cycles:
        if avg is None:
            raise CyclictestOutputError(f"no average for {cycles} cycles", path=f"{path}.avg")
        if not tmin - 0.005 <= avg <= tmax + 0.005:  # avg is printed with %.2f
            raise CyclictestOutputError(f"avg {avg} outside min {tmin} .. max {tmax}", path=path)
        if buckets and (buckets[0] < tmin or buckets[-1] > tmax):
            raise CyclictestOutputError(f"buckets {buckets[0]}..{buckets[-1]} outside min {tmin} "
                                        f".. max {tmax}",
                                        path=f"{path}.histogram")
    thread = CyclictestThread(
        index=index, cycles=cycles, min=tmin if cycles else None,
        avg=float(avg) if cycles else None,
        max=tmax if cycles else None, buckets=buckets, counts=counts,
        has_histogram=hobj is not None and (bool(buckets) or hist_range is not None),
        unit_ns=unit, avg_truncated=False, cpu=cpu, node=node,
    )
    if thread.in_range > cycles:
        raise CyclictestOutputError(f"{thread.in_range} samples in the histogram, {cycles} cycles",
                                    path=f"{path}.histogram")
    return thread
