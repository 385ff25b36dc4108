"""Property: whatever the campaign file holds, loading it returns a Campaign or raises a
ConfigError whose every line reads "<source>:<line or ?>: ..." — never another exception,
never a hang, never unbounded memory. Units parse to a finite float or raise ValueError."""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import time

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import station.config as config
import station.config.yaml_lines as campaign_yaml
from station.common.units import format_duration, parse_duration, parse_voltage
from station.config import Campaign, ConfigError, campaign_model, load_campaign, parse_campaign
from tests.conftest import REPO

# STATION_FUZZ_EXAMPLES=5000 for a longer hunt
EXAMPLES = int(os.environ.get("STATION_FUZZ_EXAMPLES", "200"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
DEMO = (REPO / "configs" / "rtai-lpt-vs-pcie.yaml").read_text()
SECONDS_PER_EXAMPLE = 10.0


def check(text: str | bytes, source: str = "<string>") -> Campaign | None:
    """The property itself, for text or bytes given to parse_campaign."""
    decoded = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    n_lines = yaml_lines(decoded)
    t0 = time.thread_time()  # this thread's CPU time: work, which a busy machine does not inflate
    try:
        return parse_campaign(text, source)
    except ConfigError as exc:
        assert_config_error(exc, source, n_lines)
        return None
    finally:
        assert time.thread_time() - t0 < SECONDS_PER_EXAMPLE


def yaml_lines(text: str) -> int:
    """Lines as YAML counts them: \n, \r\n, \r, NEL, U+2028, U+2029 end a line."""
    return len(re.findall("\r\n|[\r\n\x85\u2028\u2029]", text)) + 1


def assert_config_error(exc: ConfigError, source: str, n_lines: int) -> None:
    message = str(exc)
    assert message.strip(), "empty message"
    assert "internal error" not in message, message
    for line in message.splitlines():
        m = re.match(rf"{re.escape(source)}:(\d+|\?): (\S.*)$", line)
        assert m, f"malformed error line: {line!r}"
        if m.group(1) != "?":
            assert 1 <= int(m.group(1)) <= n_lines, line
        assert len(line) < 600, line


# --- raw text and bytes -----------------------------------------------------------------------


@FUZZ
@given(st.text(max_size=2000))
def test_arbitrary_text(text):
    check(text)


@FUZZ
@given(st.binary(max_size=2000))
def test_arbitrary_bytes(data):
    check(data)


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2000))
def test_arbitrary_files(tmp_path, data):
    path = tmp_path / "c.yaml"
    path.write_bytes(data)
    try:
        load_campaign(path)
    except ConfigError as exc:
        assert_config_error(exc, str(path), yaml_lines(data.decode("utf-8", "replace")))


# --- YAML-shaped documents: nesting, anchors, aliases, tags ----------------------------------

KEYS = [
    "name", "description", "bench", "matrix", "loads", "target", "twin", "scope", "load_hosts", "kind", "host",
    "port", "user", "identity_file", "known_hosts", "connect_timeout", "family", "module_dir", "work_dir", "fifo",
    "upload_modules", "preset", "seed", "ground_truth", "overrides", "lpt", "pcie", "resource", "dialect",
    "timeout", "channel", "volts_per_div", "position_div", "time_per_div", "record_length", "trigger_level",
    "trigger_position_pct", "threshold", "interfaces", "variants", "repetitions", "period", "samples", "duration",
    "pulses", "max_duration", "format", "cpu", "lpt_base", "lpt_irq", "module_params", "command", "t_rw",
    "sw_min", "sw_mean", "sw_std", "outlier_fraction", "outlier_delay", "clock_hz", "idle_spread", "<<", "x",
    "'a; b'", '"k\\0"', "? [1]", "1", "null", "2001-01-01",
]
SCALARS = [
    "0", "1", "-1", "10", "100", "99999", "1e400", "-1e400", ".inf", "-.inf", ".nan", "1e-300s", "100us", "1ms",
    "2min", "1h", "1e308h", "0.0001", "2.0e+9", "2e9", "0x378", "0o17", "0b101", "1_000", "true", "false", "yes",
    "no", "~", "null", "''", '""', "lpt", "pcie", "inb", "no-inb", "v1", "legacy", "twin", "ssh", "visa", "none",
    "auto", "1.5V", "500mV", "2kV", "seed-2015", "seed-2051", "/tmp/x", "'/tmp/$(id)'", "'a; touch /tmp/x'",
    "'..'", "127.0.0.1", "::1", "'-oProxyCommand=x'", "2001-13-45", "2001-12-14t21:59:43.10-05:00",
    "!!binary aGVsbG8=", "!!binary '!!!'", "!!int x", "!!float y", "!!timestamp z", "!!str 1", "!!set {a}",
    "!!omap [a: 1]", "!!pairs [a: 1]", "!!python/name:os.system", "!custom x", '"\\0"', '"\\x07"', '"\\uD800"',
    "'" + "9" * 5000 + "'", "9" * 5000, "1" * 400,
]


@st.composite
def yaml_node(draw, depth: int = 0) -> str:
    anchor = f"&a{draw(st.integers(0, 5))} " if draw(st.integers(0, 5)) == 0 else ""
    kind = draw(st.integers(0, 9)) if depth < 40 else 0
    if kind <= 4:
        return anchor + draw(st.sampled_from(SCALARS) | st.text(max_size=12).map(json_quote))
    if kind == 5:
        return f"*a{draw(st.integers(0, 6))}"  # maybe undefined, maybe recursive
    if kind <= 7:
        items = draw(st.lists(yaml_node(depth + 1), max_size=4))
        return anchor + "[" + ", ".join(items) + "]"
    pairs = draw(st.lists(st.tuples(st.sampled_from(KEYS), yaml_node(depth + 1)), max_size=4))
    return anchor + "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"


def json_quote(text: str) -> str:
    import json

    return json.dumps(text)


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(KEYS), yaml_node()), max_size=6), st.booleans())
def test_yaml_documents_with_anchors_and_aliases(pairs, with_required):
    head = "name: fuzz\nmatrix: {samples: 100}\n" if with_required else ""
    check(head + "".join(f"{k}: {v}\n" for k, v in pairs))


@FUZZ
@given(st.integers(1, 12), st.integers(1, 12), st.sampled_from(["[{}]", "{{k: {}}}", "[{}, x]"]))
def test_alias_bombs_and_deep_nesting(levels, width, shape):
    lines = ["name: x", "matrix: {samples: 10}", "a0: &a0 [lol]"]
    for i in range(1, levels):
        inner = ", ".join([f"*a{i - 1}"] * width)
        lines.append(f"a{i}: &a{i} " + shape.format(inner))
    lines.append("deep: " + "[" * (levels * width) + "]" * (levels * width))
    check("\n".join(lines) + "\n")


# --- the pure-Python parser, where libyaml is not installed ----------------------------------


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(KEYS), yaml_node()), max_size=6))
def test_pure_python_parser_too(pairs):
    loader = campaign_yaml.Loader
    campaign_yaml.Loader = campaign_yaml.PyLoader
    try:
        check("name: fuzz\nmatrix: {samples: 100}\n" + "".join(f"{k}: {v}\n" for k, v in pairs))
    finally:
        campaign_yaml.Loader = loader


# --- campaign-shaped data: plausible keys, wrong values --------------------------------------

ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    | st.sampled_from(["100us", "1e400", "1e-300s", "-5ms", "2V", "auto", "lpt", "pcie", "edu", "a;b", "/tmp/x"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def fields_of(model: type, extra: dict | None = None) -> st.SearchStrategy[dict]:
    names = list(model.model_fields)
    return st.dictionaries(st.sampled_from([*names, "bogus"]), ANY, max_size=4).map(
        lambda d: {**d, **(extra or {})}
    )


def twin_overrides() -> st.SearchStrategy:
    from station.twin.model import InterfaceParams

    names = [f.name for f in dataclasses.fields(InterfaceParams)]
    value = st.floats() | st.integers(-(10**12), 10**12) | ANY | st.lists(st.floats(), min_size=2, max_size=2)
    return st.dictionaries(st.sampled_from(["lpt", "pcie", "usb"]), st.dictionaries(st.sampled_from(names), value,
                                                                                   max_size=3), max_size=2)


load_spec = st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "-x", "record-stream"]) | ANY,
                                   "command": st.sampled_from(["x", "hping3 --flood t", "a\x00b", " "]) | ANY},
                                  optional={"host": st.sampled_from(["target", "peer", "nope"]) | ANY})

campaign_data = st.fixed_dictionaries(
    {"name": st.just("fuzz") | ANY,
     "matrix": fields_of(config.campaign_model().model_fields["matrix"].annotation) | st.fixed_dictionaries(
         {"samples": st.integers(-5, 10**13) | ANY},
         optional={"period": ANY, "loads": st.lists(st.sampled_from(["none", "io", "x"]), max_size=3),
                   "repetitions": st.integers(-5, 10**8), "module_params": st.dictionaries(
                       st.sampled_from(["lpt", "pcie"]), st.dictionaries(st.text(max_size=10), ANY, max_size=2))})},
    optional={
        "bench": st.fixed_dictionaries({}, optional={
            "target": fields_of(config.TargetSettings),
            "scope": fields_of(config.ScopeSettingsConfig),
            "twin": st.fixed_dictionaries({}, optional={"overrides": twin_overrides(), "preset": ANY, "seed": ANY}),
            "load_hosts": st.dictionaries(st.sampled_from(["peer", "a/b"]), fields_of(config.LoadHost,
                                                                                       {"host": "10.0.0.2"})),
        }),
        "loads": st.dictionaries(st.sampled_from(["none", "io", "x y"]), st.lists(load_spec, max_size=2),
                                 max_size=2),
        "description": ANY,
    },
)


@FUZZ
@given(campaign_data)
def test_campaign_shaped_data(data):
    try:
        text = yaml.safe_dump(data, allow_unicode=True)
    except yaml.YAMLError:
        assume(False)
    check(text)


@FUZZ
@given(campaign_data)
def test_python_callers_get_validation_errors_only(data):
    """campaign_model().model_validate without a file: pydantic's ValidationError (a ValueError) and
    nothing else, whatever the data."""
    with contextlib.suppress(ValueError):
        campaign_model().model_validate(data)


# --- the demo with one value replaced ---------------------------------------------------------

DEMO_LINES = DEMO.splitlines()
VALUE_LINES = [i for i, ln in enumerate(DEMO_LINES) if re.match(r"^\s*-?\s*[\w-]+:\s*\S", ln)]
GARBAGE = st.sampled_from(SCALARS) | st.text(max_size=30) | st.text(max_size=30).map(json_quote) | st.sampled_from(
    ["[", "{", "*nope", "&a", "&a [*a]", "{a: 1", "- x", ": :", "|", ">", "!!binary", "\t", "'", '"']
)


@FUZZ
@given(st.sampled_from(VALUE_LINES), GARBAGE)
def test_demo_with_one_value_replaced(index, garbage):
    lines = list(DEMO_LINES)
    key, _, _ = lines[index].partition(":")
    lines[index] = f"{key}: {garbage}"
    check("\n".join(lines) + "\n", "demo.yaml")


@FUZZ
@given(st.sampled_from(range(len(DEMO_LINES))), st.sampled_from(["delete", "duplicate", "dedent", "indent"]))
def test_demo_with_one_line_moved(index, how):
    lines = list(DEMO_LINES)
    line = lines[index]
    if how == "delete":
        del lines[index]
    elif how == "duplicate":
        lines.insert(index, line)
    elif how == "dedent":
        lines[index] = line[2:]
    else:
        lines[index] = "  " + line
    check("\n".join(lines) + "\n", "demo.yaml")


def test_demo_itself_still_loads():
    assert isinstance(check(DEMO, "demo.yaml"), Campaign)


# --- units ------------------------------------------------------------------------------------

QUANTITY_TEXT = st.text(max_size=80) | st.from_regex(
    r"\A\s?[-+]?[0-9]{0,400}(\.[0-9]{0,5})?([eE][-+]?[0-9]{1,4})?\s?(s|ms|us|µs|ns|ps|min|h|V|mV|kV|uV|x)?\Z"
)


@pytest.mark.parametrize("parse", [parse_duration, parse_voltage])
@pytest.mark.parametrize("require_unit", [False, True])
@FUZZ
@given(value=QUANTITY_TEXT | st.floats() | st.integers() | st.integers(-(10**400), 10**400) | st.booleans()
       | st.none())
def test_units_give_a_finite_float_or_value_error(parse, require_unit, value):
    try:
        result = parse(value, require_unit=require_unit)
    except ValueError as exc:
        assert len(str(exc)) < 300
        return
    assert isinstance(result, float) and math.isfinite(result)


@FUZZ
@given(st.floats(min_value=1e-9, max_value=1e6))
def test_format_duration_round_trips(seconds):
    assert parse_duration(format_duration(seconds), require_unit=True) == pytest.approx(seconds, rel=1e-5)
