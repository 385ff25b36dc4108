"""The campaign file: units, errors that name file:line and field, the schema."""

from __future__ import annotations

import json

import pytest

from station.common.units import parse_duration, parse_voltage
from station.config import ConfigError, design_notes, expand_runs, json_schema, load_campaign, parse_campaign
from tests.conftest import REPO, run_station


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("100us", 100e-6), ("100 µs", 100e-6), ("14min", 840.0), ("2.5 s", 2.5), ("500ns", 5e-7), (0.25, 0.25)],
)
def test_durations_as_people_write_them(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(("text", "volts"), [("2.5V", 2.5), ("500 mV", 0.5), ("1.5v", 1.5), (3, 3.0)])
def test_voltages(text, volts):
    assert parse_voltage(text) == pytest.approx(volts)


def test_unknown_unit_is_an_error_that_lists_units():
    with pytest.raises(ValueError, match="unknown unit 'parsecs'.*us"):
        parse_duration("3 parsecs")


def test_errors_name_file_line_and_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: x\n"
        "matrix:\n"
        "  interfaces: [lpt]\n"
        "  period: 100 furlongs\n"
        "  samples: 10\n"
        "bench:\n"
        "  scope:\n"
        "    volts_per_dvi: 1V\n"
    )
    with pytest.raises(ConfigError) as info:
        load_campaign(path)
    text = str(info.value)
    assert f"{path}:4: matrix.period: unknown unit 'furlongs'" in text
    assert f"{path}:8: bench.scope.volts_per_dvi: unknown key" in text


def test_a_run_needs_a_stop_condition():
    with pytest.raises(ConfigError, match=r"<string>:2: matrix: give samples or duration"):
        parse_campaign("name: x\nmatrix:\n  period: 1ms\n")


def test_loads_named_in_the_matrix_must_exist():
    with pytest.raises(ConfigError, match=r"<string>:2: matrix\.loads\.0: names 'heavy', which is not under loads"):
        parse_campaign("name: x\nmatrix: {samples: 10, loads: [heavy]}\n")


def test_yaml_syntax_error_has_a_line():
    with pytest.raises(ConfigError, match=r"<string>:4: not valid YAML: mapping values"):
        parse_campaign("name: x\nmatrix:\n  samples: 10\n   period: 1ms\n")


def test_matrix_expands_interface_variant_load_repetition():
    c = parse_campaign(
        "name: x\nmatrix: {samples: 10, repetitions: 2, loads: [none, io], order: as-written}\n"
        "loads: {none: [], io: []}\n"
    )
    ids = [r.id for r in expand_runs(c)]
    assert len(ids) == 2 * 2 * 2 * 2 and len(set(ids)) == len(ids)
    assert ids[0] == "lpt-inb-none-r0" and ids[-1] == "pcie-no-inb-io-r1"


def _ids(name: str = "x", extra: str = "") -> list[str]:
    c = parse_campaign(f"name: {name}\nmatrix: {{samples: 10, repetitions: 3, loads: [none, io]{extra}}}\n"
                       "loads: {none: [], io: []}\n")
    return [r.id for r in expand_runs(c)]


def test_the_interleaved_order_runs_every_condition_once_a_round_in_a_seeded_random_order():
    """The default order (issue 46): each repetition is a round holding every condition once, each
    round in its own random order, the same for the same seed (a resumed campaign goes on in it)."""
    written = _ids(extra=", order: as-written")
    ids = _ids()
    assert sorted(ids) == sorted(written)
    rounds = [ids[k * 8:(k + 1) * 8] for k in range(3)]
    for r, round_ in enumerate(rounds):
        assert {i.rsplit("-r", 1)[0] for i in round_} == {i.rsplit("-r", 1)[0] for i in written[:8]}
        assert all(i.endswith(f"-r{r}") for i in round_)
    conditions = [[i.rsplit("-r", 1)[0] for i in round_] for round_ in rounds]
    assert conditions[0] != conditions[1] or conditions[1] != conditions[2]  # each round its own order
    assert ids != written and ids == _ids()
    assert _ids(extra=", order_seed: 5") == _ids("y", ", order_seed: 5") != _ids(extra=", order_seed: 6")
    assert _ids("y") != ids  # the default seed comes from the name


def test_a_design_that_cannot_answer_its_comparisons_is_told():
    one = parse_campaign("name: x\nmatrix: {samples: 10}\n")
    assert any("one run per condition" in n for n in design_notes(one))
    drifting = parse_campaign("name: x\nmatrix: {samples: 10, repetitions: 3, order: as-written}\n")
    assert any("drift" in n for n in design_notes(drifting))
    assert design_notes(parse_campaign("name: x\nmatrix: {samples: 10, repetitions: 3}\n")) == []
    alone = parse_campaign("name: x\nmatrix: {samples: 10, interfaces: [lpt], variants: [inb]}\n")
    assert design_notes(alone) == []  # one condition: nothing to compare


def test_every_shipped_config_validates():
    # the key files a real-bench config names exist only on that bench (lpt-vs-pcie-qemu.yaml's appear
    # with `station vm up`): the schema is checked here, the files by test_config_hardening
    for path in sorted((REPO / "configs").glob("*.yaml")):
        load_campaign(path, check_files=False)


def test_schema_is_json_schema_with_units_as_strings():
    schema = json.loads(json_schema())
    assert schema["title"] == "Campaign"
    assert "matrix" in schema["required"]


def test_cli_validate_bad_config_one_message_no_traceback(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("name: x\nmatrix:\n  samples: -5\n")
    res = run_station("validate", str(bad))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr + res.stdout
    assert f"{bad}:3: matrix.samples" in res.stderr


def test_cli_run_bad_config_fails_cleanly(tmp_path):
    bad = tmp_path / "c.yaml"
    bad.write_text("name: x\nmatrix: {samples: 10}\nbench: {target: {kind: telnet}}\n")
    res = run_station("run", str(bad), "--out", str(tmp_path / "out"))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    assert "bench.target.kind" in res.stderr and ":3:" in res.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        ("{samples: 10, interfaces: [lpt, lpt]}", "interfaces lists a value twice"),
        ("{samples: 10, period: 100.5us}", "whole microseconds"),
        ("{samples: 10, period: 5us}", "at least 10 us"),
        ("{samples: 10000000, period: 1ms, max_duration: 1h}", "max_duration is 3600 s"),
        ("{duration: 2h, max_duration: 1h}", "max_duration is 3600 s"),
    ],
)
def test_matrices_that_could_never_complete_are_refused(matrix, message):
    with pytest.raises(ConfigError, match=message):
        parse_campaign(f"name: x\nmatrix: {matrix}\n")


def test_load_names_that_would_collide_are_refused():
    with pytest.raises(ConfigError, match="uses a load name twice"):
        parse_campaign("name: x\nmatrix: {samples: 10, loads: [io]}\n"
                       "loads: {io: [{name: a, command: x}, {name: a, command: y}]}\n")
    with pytest.raises(ConfigError, match="reserved"):
        parse_campaign(
            "name: x\nmatrix: {samples: 10, loads: [io]}\nloads: {io: [{name: record-stream, command: x}]}\n"
        )
    with pytest.raises(ConfigError, match="load set name 'a/b'"):
        parse_campaign("name: x\nmatrix: {samples: 10, loads: [a/b]}\nloads: {a/b: []}\n")


def test_twin_preset_and_overrides_are_checked_when_validating():
    with pytest.raises(ConfigError, match=r"<string>:3: bench\.twin.*no twin preset 'seed-2051'"):
        parse_campaign("name: x\nbench:\n  twin: {preset: seed-2051}\nmatrix: {samples: 10}\n")
    with pytest.raises(ConfigError, match="t_rvv"):
        parse_campaign("name: x\nbench:\n  twin: {overrides: {lpt: {t_rvv: 1}}}\nmatrix: {samples: 10}\n")


def test_pulses_need_a_scope():
    with pytest.raises(ConfigError, match="bench.scope.kind is none"):
        parse_campaign("name: x\nbench: {scope: {kind: none}}\nmatrix: {samples: 10, pulses: 100}\n")
