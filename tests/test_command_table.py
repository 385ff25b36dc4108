"""docs/scopes/commands.md lists every command each instrument driver sends, with the reference it
was checked against. This test drives each driver through everything the station asks of it, over
TCP against the twin's instruments (single records, every channel, the scope's own measurement,
segmented acquisitions and their fallbacks, the generator's stimulus with and without jitter and
its square-carrier fallback, an error read back), collects the command headers the instruments
received, and checks the table holds exactly those, each with a reference: a driver that starts
sending a new command fails here until the table names it and its source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from instruments.funcgen import GeneratorError, GeneratorSettings, Keysight33500, open_generator
from instruments.scope import ScopeError, ScopeSettings, open_scope
from instruments.sim import PeriodicEdgeSource, SimScopeServer, run_in_thread
from instruments.sim.funcgen import SimGeneratorServer, serve_in_thread

TABLE = Path(__file__).resolve().parents[1] / "docs" / "scopes" / "commands.md"
BOGUS = "NOSUCH:HEADer"  # sent to read an error back; not a command of any driver


def program_headers(messages: list[str]) -> list[str]:
    """Each program message unit's header, resolved by the IEEE 488.2 path rule (a unit with no
    leading colon after another continues that one's path), numeric suffixes as <n>."""
    out = []
    for message in messages:
        prefix: list[str] = []
        for unit in re.split(r';(?=(?:[^"]*"[^"]*")*[^"]*$)', message):
            words = unit.strip().split(None, 1)
            if not words:
                continue
            header = words[0]
            if header.startswith("*"):
                out.append(header)
                continue
            absolute = header.startswith(":")
            nodes = header.lstrip(":").split(":")
            if not absolute and prefix:
                nodes = prefix + nodes
            prefix = nodes[:-1]
            text = ":".join(re.sub(r"(?<=[A-Za-z])\d+(?=\??$)", "<n>", n) for n in nodes)
            out.append((":" if absolute else "") + text)
    return out


def _settings(**extra: object) -> ScopeSettings:
    base = dict(volts_per_div=1.0, position_div=-3.0, time_per_div=50e-6, record_length=5000,
                trigger_level_v=1.5, trigger_slope="rise")
    return ScopeSettings(**(base | extra))  # type: ignore[arg-type]


def _drive_scope(dialect: str, idn: str | None = None) -> list[str]:
    sim = SimScopeServer(PeriodicEdgeSource(seed=3), seed=7, dialect=dialect, idn=idn)
    with run_in_thread(sim), open_scope(sim.resource, dialect=dialect, timeout_s=5.0) as scope:
        scope.identify()
        scope.reset()
        scope.configure(_settings(extra_channels=(2,)))
        scope.acquire_single()
        scope.acquire_channels()
        scope.configure(_settings(measurement=True))
        scope.acquire_measurement()
        scope.fetch()
        if dialect != "tektronix_tds":
            scope.configure(_settings(time_per_div=2.5e-6, record_length=1000, segments=20))
            scope.acquire_frames()
        scope.check_errors()
        with pytest.raises(ScopeError):
            scope.write(f"{BOGUS} 1")
        return sim.commands


def _drive_generator() -> list[str]:
    commands = []
    for fm_on_pulse in (True, False):
        with serve_in_thread(SimGeneratorServer(seed=1, fm_on_pulse=fm_on_pulse)) as sim, \
                open_generator(sim.resource, timeout_s=2.0) as gen:
            assert isinstance(gen, Keysight33500)
            gen.identify()
            gen.reset()
            for jitter in (0.2, 0.0):
                gen.configure(GeneratorSettings(frequency_hz=5e3, width_s=20e-6, jitter=jitter))
            gen.set_output(True)
            gen.output_enabled()
            gen.set_output(False)
            gen.check_errors()
            with pytest.raises(GeneratorError):
                gen.write(f"{BOGUS} 1")
            commands += sim.commands
    return commands


def sent() -> dict[str, set[str]]:
    drivers = {
        "tektronix_tds": _drive_scope("tektronix_tds"),
        "tektronix_mso": _drive_scope("tektronix_mso"),
        # a 3000T (every segment in one transfer), and a 2000 X (no :WAVeform:SEGMented:ALL:
        # segment by segment)
        "keysight_infiniivision": _drive_scope("keysight_infiniivision")
        + _drive_scope("keysight_infiniivision", "KEYSIGHT TECHNOLOGIES,DSO-X 2024A,MY00000001,02.50.2019"),
        "keysight_33500": _drive_generator(),
    }
    return {d: {h for h in program_headers(c) if h.lstrip(":").upper() != BOGUS.upper()}
            for d, c in drivers.items()}


def documented() -> dict[str, dict[str, str]]:
    """commands.md: per '## <dialect>' section, each table row's command -> its reference."""
    table: dict[str, dict[str, str]] = {}
    section = None
    for line in TABLE.read_text().splitlines():
        if line.startswith("## "):
            section = line[3:].strip().strip("`")
            table[section] = {}
        elif section and line.startswith("| `"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            table[section][cells[0].strip("`").replace("\\|", "|")] = cells[-1]
    return table


@pytest.fixture(scope="module")
def commands() -> dict[str, set[str]]:
    return sent()


def test_the_header_resolver_follows_the_path_rule():
    assert program_headers(["MEASUrement:MEAS1:RESUlts:CURRentacq:POPUlation?;MEAN?;*ESR?;MAXimum?",
                            ':CHANnel2:SCALe 1;:TIMebase:SCALe 1e-3', 'MEASUrement:ADDNew "MEAS1";*OPC?']) == [
        "MEASUrement:MEAS<n>:RESUlts:CURRentacq:POPUlation?", "MEASUrement:MEAS<n>:RESUlts:CURRentacq:MEAN?",
        "*ESR?", "MEASUrement:MEAS<n>:RESUlts:CURRentacq:MAXimum?", ":CHANnel<n>:SCALe", ":TIMebase:SCALe",
        "MEASUrement:ADDNew", "*OPC?"]


@pytest.mark.parametrize("dialect", ["tektronix_tds", "tektronix_mso", "keysight_infiniivision", "keysight_33500"])
def test_the_table_lists_exactly_what_each_driver_sends_with_a_reference(dialect: str, commands) -> None:  # noqa: ANN001
    table = documented()
    assert dialect in table, f"commands.md has no '## {dialect}' section"
    rows = table[dialect]
    missing = sorted(commands[dialect] - set(rows))
    assert not missing, f"{dialect} sends commands the table does not list: {missing}"
    stale = sorted(set(rows) - commands[dialect])
    assert not stale, f"the table lists commands {dialect} no longer sends: {stale}"
    unreferenced = sorted(c for c, ref in rows.items() if not re.search(r"\[[A-Z]+\d+\]|IEEE 488\.2", ref))
    assert not unreferenced, f"{dialect}: rows without a reference: {unreferenced}"
