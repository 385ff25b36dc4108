"""Config inputs that used to crash, hang, run as shell or pass when wrong: each is now a
ConfigError that names the file, the line and the field."""

from __future__ import annotations

import dataclasses
import os
import pathlib
import pwd
import re
import subprocess
import tempfile
import time
import tracemalloc

import pytest

from station.config import (
    MAX_RUNS,
    ConfigError,
    TargetSettings,
    TwinInterfaceOverrides,
    campaign_model,
    expand_runs,
    load_campaign,
    parse_campaign,
)
from station.config.yaml_lines import load_yaml
from tests.conftest import REPO, missing, run_station

MINIMAL = "name: x\nmatrix:\n  samples: 10\n"


def refused(text: str | bytes, source: str = "<string>") -> str:
    with pytest.raises(ConfigError) as info:
        parse_campaign(text, source)
    message = str(info.value)
    for line in message.splitlines():
        assert re.match(rf"{re.escape(source)}:(\d+|\?): \S", line), line
    return message


def bounded(fn, seconds: float = 5.0, megabytes: float = 64.0):
    """fn() within a work and a Python-heap budget: the work is this thread's CPU time, which other
    processes on a busy machine (a parallel test pass, a CPU hog) do not add to as they do to the wall
    clock's."""
    tracemalloc.start()
    t0 = time.thread_time()
    try:
        return fn()
    finally:
        elapsed = time.thread_time() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert elapsed < seconds, f"took {elapsed:.1f} s"
        assert peak < megabytes * 2**20, f"peak {peak / 2**20:.0f} MiB"


# --- crashes and hangs ------------------------------------------------------------------------


def test_billion_laughs_is_refused_quickly_in_little_memory():
    laughs = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    message = bounded(lambda: refused(MINIMAL + laughs))
    assert re.fullmatch(r"<string>:\d+: refused: expands to more than 100000 values.*", message)


def test_alias_uses_are_counted():
    text = MINIMAL + "a: &a 1\nb: [" + ", ".join(["*a"] * 101) + "]\n"
    assert re.fullmatch(r"<string>:5: refused: more than 100 alias uses", refused(text))


def test_ten_million_repetitions_refused_before_expansion():
    message = bounded(lambda: refused(MINIMAL + "  repetitions: 10000000\n"))
    assert message.startswith("<string>:4: matrix.repetitions:") and "10000" in message


def test_total_run_count_is_capped():
    text = ("name: x\nmatrix:\n  samples: 10\n  loads: [a, b, c]\n  repetitions: 10000\n"
            "loads: {a: [], b: [], c: []}\n")
    message = refused(text)
    assert message.startswith("<string>:5: matrix.repetitions: 2 interfaces × 2 variants × 3 loads")
    assert f"at most {MAX_RUNS}" in message


def test_expand_runs_rechecks_the_cap_after_model_copy():
    c = parse_campaign(MINIMAL)
    huge = c.model_copy(update={"matrix": c.matrix.model_copy(update={"repetitions": 10**7})})
    with pytest.raises(ConfigError, match="runs; at most"):
        bounded(lambda: expand_runs(huge))


def test_binary_file(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"name: x\n" + bytes(range(256)) * 4)
    with pytest.raises(ConfigError) as info:
        load_campaign(path)
    assert str(info.value) == f"{path}:4: not a text file (byte 136 is not UTF-8)"  # \n and \r end lines


def test_nul_in_utf8_text(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(b"name: x\nmatrix: {samples: 1\x000}\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:2: not a text file \(character 27 is U\+0000"):
        load_campaign(path)


def test_oversized_file_and_not_a_file(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# padding\n" * 200_000)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(big))}: too large"):
        load_campaign(big)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(tmp_path))}: cannot read: is not a regular file"):
        load_campaign(tmp_path)
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read: does not exist$"):
        load_campaign(tmp_path / "nope.yaml")


@pytest.mark.parametrize("value", ["1e400", "1e400us", "-1e400 s", "1e308h"])
def test_overflowing_period(value):
    message = refused(f"{MINIMAL}  period: {value}\n")
    assert message.startswith("<string>:4: matrix.period:") and "not a finite duration" in message


def test_deep_nesting():
    message = refused(MINIMAL + "description: " + "[" * 10_000 + "]" * 10_000 + "\n")
    assert message == "<string>:4: refused: nested deeper than 32 levels"


def test_deep_nesting_through_aliases():
    text = MINIMAL + "a: &a " + "[" * 20 + "1" + "]" * 20 + "\nb: " + "[" * 20 + "*a" + "]" * 20 + "\n"
    assert refused(text) == "<string>:5: refused: nested deeper than 32 levels once aliases are expanded"


@pytest.mark.parametrize(
    "doc", ["loads: &a {x: [*a]}\n", "loads: &a [*a]\n", "loads: &a {<<: *a}\n", "description: &d [[[*d]]]\n"]
)
def test_recursive_alias(doc):
    assert re.fullmatch(r"<string>:4: refused: alias \*\w+ is inside its own anchor \(recursive alias\)",
                        refused(MINIMAL + doc))


def test_a_key_given_twice_is_refused_with_both_lines():
    """YAML keeps the last of two equal keys without a word: 100 samples asked, 5 000 000 run."""
    assert refused("name: x\nmatrix:\n  samples: 100\n  period: 1ms\n  samples: 5000000\n") == (
        "<string>:5: refused: key 'samples' given twice (lines 3 and 5): say it once")
    assert refused(MINIMAL + "name: y\n") == "<string>:4: refused: key 'name' given twice (lines 1 and 4): say it once"
    # inside a list item, and quoted the other time: the same key
    assert refused(MINIMAL + "loads:\n  l:\n    - {name: a, 'name': b}\n") == (
        "<string>:6: refused: key 'name' given twice (lines 6 and 6): say it once")
    # a merge key's values are overridden by the mapping's own, as YAML defines: no duplicate
    data, _ = load_yaml("base: &b {samples: 10, period: 1ms}\nmatrix:\n  <<: *b\n  samples: 20\n", "c.yaml")
    assert data["matrix"] == {"samples": 20, "period": "1ms"}


def test_scalars_python_cannot_build_are_yaml_errors():
    assert refused(MINIMAL + "description: 2001-13-45\n") == (
        "<string>:4: not valid YAML: cannot read '2001-13-45': month must be in 1..12")
    assert refused("name: x\nmatrix: {samples: " + "1" * 5000 + "}\n").startswith(
        "<string>:2: not valid YAML: cannot read '111")


# --- accepted but wrong -----------------------------------------------------------------------


def test_infinite_max_duration():
    assert refused(MINIMAL + "  max_duration: .inf\n") == (
        "<string>:4: matrix.max_duration: inf is not a finite duration")


def test_vanishing_duration():
    assert refused("name: x\nmatrix:\n  duration: 1e-300s\n").startswith(
        "<string>:3: matrix.duration: 1e-291ns is too small: at least 1 ms")


def test_durations_have_an_upper_bound():
    assert "at most 7 days" in refused("name: x\nmatrix:\n  duration: 30000h\n  max_duration: 1h\n")


def test_negative_lpt_irq_and_base():
    message = refused(MINIMAL + "  lpt_irq: -1\n  lpt_base: -0x378\n")
    assert "<string>:4: matrix.lpt_irq: Input should be greater than or equal to 0" in message
    assert "<string>:5: matrix.lpt_base: Input should be greater than or equal to 0" in message
    assert "matrix.lpt_base: Input should be less than or equal to 65535" in refused(MINIMAL + "  lpt_base: 0x10000\n")
    assert "matrix.lpt_irq: Input should be less than or equal to 255" in refused(MINIMAL + "  lpt_irq: 256\n")


def test_cpu_out_of_range():
    assert refused(MINIMAL + "  cpu: 99999\n") == "<string>:4: matrix.cpu: Input should be less than or equal to 4095"
    assert "matrix.cpu" in refused(MINIMAL + "  cpu: -2\n")


@pytest.mark.parametrize("value", ["2.0e+9", "2000000000", "2e9", "true", "1.5"])
def test_record_length_out_of_range_or_not_an_integer(value):
    text = f"name: x\nbench:\n  scope:\n    record_length: {value}\nmatrix: {{samples: 10}}\n"
    assert refused(text).startswith("<string>:4: bench.scope.record_length: ")


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("outlier_fraction: -0.1", "outlier_fraction: -0.1: a fraction is between 0 and 1"),
        ("tail_fraction: 1.5", "tail_fraction: 1.5: a fraction is between 0 and 1"),
        ("sw_std: 0", "sw_std: 0 ns: must be positive"),
        ("t_rw: -5", "t_rw: -5 ns: must be zero or positive"),
        ("tail_scale: .inf", "tail_scale: Input should be a finite number"),
        ("clock_hz: 0.5", "clock_hz: 0.5 Hz: 0 (no board clock) or a whole number"),
        ("outlier_delay: [17000, 14000]", "outlier_delay: [low, high] with low <= high"),
        ("idle_spread: 0", "idle_spread: 0: idle_spread scales"),
        ("t_rvv: 1", "t_rvv: unknown key"),
    ],
)
def test_twin_overrides_are_physical(override, message):
    text = f"name: x\nbench:\n  twin:\n    overrides:\n      pcie:\n        {override}\nmatrix: {{samples: 10}}\n"
    assert refused(text).startswith(f"<string>:6: bench.twin.overrides.pcie.{message}")


def test_twin_overrides_must_leave_a_calibratable_model():
    text = "name: x\nbench:\n  twin:\n    overrides:\n      lpt: {sw_mean: 5000}\nmatrix: {samples: 10}\n"
    assert refused(text) == "<string>:5: bench.twin.overrides.lpt: sw_mean (5000) must exceed sw_min (5700)"
    text = "name: x\nbench:\n  twin:\n    overrides:\n      lpt: {t_rw: 9000}\nmatrix: {samples: 10}\n"
    assert "t_rw (9000) exceeds sw_min (5700)" in refused(text)


def test_twin_override_fields_are_the_model_parameters():
    from station.twin.model import InterfaceParams

    assert set(TwinInterfaceOverrides.model_fields) == {f.name for f in dataclasses.fields(InterfaceParams)}


def test_twin_preset_name_cannot_leave_the_preset_directory():
    text = "name: x\nbench:\n  twin: {preset: ../../../etc/passwd}\nmatrix: {samples: 10}\n"
    assert refused(text).startswith("<string>:3: bench.twin.preset: '../../../etc/passwd' is not a preset name")


@pytest.mark.parametrize(
    ("line", "example"),
    [("  period: 100", "100us"), ("  period: 0.0001", "0.0001us"), ("  max_duration: '60'", "60us")],
)
def test_unitless_durations_in_files(line, example):
    message = refused(f"{MINIMAL}{line}\n")
    assert message.startswith("<string>:4: matrix.") and f"has no unit: write a unit, e.g. {example}" in message


def test_unitless_voltage_in_files():
    assert refused("name: x\nbench: {scope: {trigger_level: 2}}\nmatrix: {samples: 10}\n") == (
        "<string>:2: bench.scope.trigger_level: 2 has no unit: write a unit, e.g. 2V or 2mV")


def test_bare_zero_needs_no_unit_but_meets_the_range():
    assert refused("name: x\nmatrix:\n  duration: 0\n") == (
        "<string>:3: matrix.duration: 0ns is too small: at least 1 ms")


def test_python_callers_may_pass_plain_floats():
    Matrix = campaign_model().model_fields["matrix"].annotation  # the core's keys and every kind's
    m = Matrix(samples=10, period=100e-6, max_duration=60)
    assert m.period == 100e-6 and m.max_duration == 60.0
    c = campaign_model().model_validate({"name": "x", "matrix": {"samples": 10, "period": 0.001},
                                 "bench": {"scope": {"trigger_level": 2}}})
    assert c.bench.scope.trigger_level == 2.0
    assert TargetSettings(kind="ssh").host == "127.0.0.1"
    with pytest.raises(ValueError, match="not a finite duration"):
        Matrix(samples=10, period=float("inf"))


# --- errors at their line ---------------------------------------------------------------------


def test_misspelled_load_is_reported_at_its_line():
    text = "name: x\nmatrix:\n  samples: 10\n  loads:\n    - none\n    - seed-oi\nloads:\n  none: []\n  seed-io: []\n"
    assert refused(text, "c.yaml") == (
        "c.yaml:6: matrix.loads.1: names 'seed-oi', which is not under loads: (none, seed-io); "
        "did you mean 'seed-io'?")


def test_unknown_load_host_is_reported_at_its_line():
    text = ("name: x\nmatrix: {samples: 10, loads: [io]}\nbench:\n  load_hosts:\n    peer: {host: 10.0.0.2}\n"
            "loads:\n  io:\n    - name: flood\n      command: hping3 --flood target\n      host: peeer\n")
    assert refused(text) == (
        "<string>:10: loads.io.0.host: load io/flood runs on 'peeer', not a bench.load_hosts entry (peer)")


# --- nothing from the file runs as shell ------------------------------------------------------


def _module_params(params: str) -> str:
    return f"{MINIMAL}  module_params:\n    pcie:\n      {params}\n"


def test_module_param_key_with_shell_is_refused():
    message = refused(_module_params("'a; touch /tmp/x; b': 1"))
    assert message.startswith("<string>:6: matrix.module_params.pcie.'a; touch /tmp/x; b': ")
    assert "not a module parameter name" in message


@pytest.mark.parametrize("value", ["'edu; reboot'", "'$(id)'", "'a b'", "\"x\\ny\"", "'`id`'", "1.5", "[1]"])
def test_module_param_values_are_words_or_integers(value):
    assert refused(_module_params(f"profile: {value}")).startswith("<string>:6: matrix.module_params.pcie.profile: ")


def test_module_params_cannot_override_the_station():
    assert refused(_module_params("period_us: 5")) == (
        "<string>:6: matrix.module_params.pcie.period_us: period_us is set by the station from matrix.period; "
        "set it there")


def test_harmless_module_params_pass():
    c = parse_campaign(_module_params("{profile: edu, trigger: emulated, debug: -1, list: 'a,b:c+d'}"))
    assert c.matrix.module_params == {"pcie": {"profile": "edu", "trigger": "emulated", "debug": -1,
                                               "list": "a,b:c+d"}}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("target: {work_dir: '/tmp/$(reboot)'}", "bench.target.work_dir"),
        ("target: {module_dir: 'relative/dir'}", "bench.target.module_dir"),
        ("target: {module_dir: '/opt/../etc'}", "bench.target.module_dir"),
        ("target: {work_dir: '/tmp/a b'}", "bench.target.work_dir"),
        ("target: {work_dir: \"/tmp/x\\n\"}", "bench.target.work_dir"),
        ("target: {host: '-oProxyCommand=sh'}", "bench.target.host"),
        ("target: {host: 'a;b'}", "bench.target.host"),
        ("target: {user: 'root; id'}", "bench.target.user"),
        ("load_hosts: {peer: {host: 10.0.0.2, work_dir: '/tmp/`id`'}}", "bench.load_hosts.peer.work_dir"),
        ("load_hosts: {peer: {host: 'x y'}}", "bench.load_hosts.peer.host"),
        ("load_hosts: {'a/b': {host: x}}", "bench.load_hosts.'a/b'"),
        ("target: {identity_file: \"/k\\0ey\"}", "bench.target.identity_file"),
    ],
)
def test_values_that_reach_a_shell_are_checked(field, value):
    assert refused(f"name: x\nbench:\n  {field}\nmatrix: {{samples: 10}}\n").startswith(f"<string>:3: {value}: ")


def test_host_names_and_addresses_pass():
    for host in ("bench-7.lab.example.org", "10.0.0.5", "::1", "fe80::1%eth0", "rt_target"):
        parse_campaign(f"name: x\nbench:\n  target: {{kind: ssh, host: '{host}'}}\nmatrix: {{samples: 10}}\n")


@pytest.mark.parametrize(
    ("load", "field"),
    [
        ("{name: '-rf', command: x}", "loads.io.0.name"),
        ("{name: '..', command: x}", "loads.io.0.name"),
        ("{name: a, command: \"x\\0y\"}", "loads.io.0.command"),
        ("{name: a, command: \"x\\ry\"}", "loads.io.0.command"),
        ("{name: a, command: ' '}", "loads.io.0.command"),
        ("{name: a, command: x, host: '$(id)'}", "loads.io.0.host"),
    ],
)
def test_load_names_and_commands(load, field):
    text = f"name: x\nmatrix: {{samples: 10, loads: [io]}}\nloads:\n  io:\n    - {load}\n"
    assert refused(text).startswith(f"<string>:5: {field}: ")


def test_load_commands_stay_shell():
    c = parse_campaign("name: x\nmatrix: {samples: 10, loads: [io]}\nloads:\n  io:\n    - name: a\n      command: |\n"
                       "        while :; do dd if=/dev/zero of=x bs=1M count=1; done &\n        sleep 1\t| cat\n")
    assert c.loads["io"][0].command.startswith("while :; do dd")


# --- files named by the campaign, checked at validate time ------------------------------------


def _ssh_config(tmp_path, **target) -> str:
    fields = ", ".join(f"{k}: '{v}'" for k, v in target.items())
    return (f"name: x\nbench:\n  target: {{kind: ssh, host: 10.0.0.9, {fields}}}\n  scope: {{kind: none}}\n"
            "matrix: {samples: 10}\n")


def test_missing_identity_file_at_validate(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(_ssh_config(tmp_path, identity_file=tmp_path / "id_missing", known_hosts=tmp_path / "kh"))
    with pytest.raises(ConfigError) as info:
        load_campaign(path)
    assert str(info.value).splitlines() == [
        f"{path}:3: bench.target.identity_file: {tmp_path / 'id_missing'} does not exist",
        f"{path}:3: bench.target.known_hosts: {tmp_path / 'kh'} does not exist",
    ]
    load_campaign(path, check_files=False)  # the schema itself is fine
    res = run_station("validate", str(path))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"{path}:3: bench.target.identity_file: " in res.stderr and "valid" not in res.stdout


def test_files_that_exist_pass_and_tilde_is_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    import asyncssh

    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(tmp_path / "id"))
    (tmp_path / "kh").write_text("")
    (tmp_path / "mods").mkdir()
    path = tmp_path / "c.yaml"
    path.write_text(_ssh_config(tmp_path, identity_file="~/id", known_hosts="~/kh", upload_modules="~/mods"))
    load_campaign(path)


def test_upload_modules_must_be_a_directory_and_load_host_keys_exist(tmp_path):
    (tmp_path / "file").write_text("")
    path = tmp_path / "c.yaml"
    path.write_text(
        "name: x\nbench:\n"
        f"  target: {{kind: ssh, host: 10.0.0.9, upload_modules: '{tmp_path / 'file'}'}}\n"
        "  load_hosts:\n"
        f"    peer:\n      host: 10.0.0.2\n      identity_file: '{tmp_path / 'nokey'}'\n"
        "matrix: {samples: 10}\n"
    )
    with pytest.raises(ConfigError) as info:
        load_campaign(path)
    assert str(info.value).splitlines() == [
        f"{path}:3: bench.target.upload_modules: {tmp_path / 'file'} is not a directory",
        f"{path}:7: bench.load_hosts.peer.identity_file: {tmp_path / 'nokey'} does not exist",
    ]


UNPRIVILEGED = "irqstation-test"  # a system user, made for this check when the tests run as root


def _unprivileged_ids() -> tuple[int, int]:
    """uid and gid of a user without root's right to read every file: UNPRIVILEGED, created (as a
    system user with no home and no login shell) if it does not exist."""
    try:
        user = pwd.getpwnam(UNPRIVILEGED)
    except KeyError:
        try:
            made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                                   UNPRIVILEGED], capture_output=True, text=True, timeout=60)
            why = made.stderr.strip() or f"useradd exited with {made.returncode}"
        except OSError as exc:
            why = str(exc)
        try:
            user = pwd.getpwnam(UNPRIVILEGED)
        except KeyError:
            missing(f"an unprivileged user to check unreadable files as root: useradd {UNPRIVILEGED} failed ({why})")
    return user.pw_uid, user.pw_gid


def _load_as(uid: int, gid: int, path) -> str:
    """load_campaign(path) in a forked child that has dropped to uid/gid (no exec: the interpreter and
    the checkout may lie where that user cannot go); what happened, as "valid" or "<error>: message"."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report through the pipe, never return into pytest
        status = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            try:
                load_campaign(path)
                outcome = "valid"
            except BaseException as exc:  # noqa: BLE001 - every outcome goes back to the test
                outcome = f"{type(exc).__name__}: {exc}"
            with os.fdopen(write, "w") as out:
                out.write(outcome)
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as inp:
        outcome = inp.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, f"the child as uid {uid} failed: {outcome!r}"
    return outcome


def test_unreadable_identity_file():
    """A key file the station's user cannot read is refused at validate time. Root reads every file,
    so as root the check runs in a child that is an unprivileged user (in a directory it can reach:
    pytest's tmp_path is private to root)."""
    import asyncssh

    with tempfile.TemporaryDirectory(prefix="irqstation-unreadable-") as tmp:
        tmp_path = pathlib.Path(tmp)
        tmp_path.chmod(0o755)
        key = tmp_path / "id"
        asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key))
        path = tmp_path / "c.yaml"
        path.write_text(_ssh_config(tmp_path, identity_file=key))
        path.chmod(0o644)
        load_campaign(path)  # readable: valid (and every module the check needs is imported)
        key.chmod(0)
        expected = rf"{re.escape(str(path))}:3: bench.target.identity_file: {re.escape(str(key))} is not readable$"
        if os.geteuid() != 0:
            with pytest.raises(ConfigError, match=expected):
                load_campaign(path)
            return
        load_campaign(path)  # root itself may read it
        uid, gid = _unprivileged_ids()
        outcome = _load_as(uid, gid, path)
        assert re.fullmatch(rf"ConfigError: {expected}", outcome), outcome
        key.chmod(0o400)
        os.chown(key, uid, gid)  # the same file, now that user's own: valid
        assert _load_as(uid, gid, path) == "valid"


def test_twin_targets_need_no_key_files(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nbench: {target: {kind: twin, identity_file: /nonexistent}}\nmatrix: {samples: 10}\n")
    load_campaign(path)


def test_shipped_configs_name_their_files_at_known_lines():
    """lpt-vs-pcie-qemu.yaml names files under ~/.cache/irq-station/vm that `station vm build/up` create;
    where they are missing the error says which, at its line."""
    for path in sorted((REPO / "configs").glob("*.yaml")):
        try:
            load_campaign(path)
        except ConfigError as exc:
            fields = r"bench\.target\.(identity_file|known_hosts|upload_modules)"
            for line in str(exc).splitlines():
                assert re.match(rf"{re.escape(str(path))}:\d+: {fields}: ", line), line


def test_the_cli_says_what_it_is_and_what_is_missing(tmp_path) -> None:
    """`--version`; a missing campaign file or results directory named as missing (no ':?:'
    placeholder, no 'no runs/ inside' for a directory that is not there), exit 2."""
    from tests.conftest import run_station

    res = run_station("--version")
    assert res.returncode == 0 and res.stdout.startswith("irq-station ")
    res = run_station("validate", str(tmp_path / "nope.yaml"))
    assert res.returncode == 2 and res.stderr.strip() == f"error: {tmp_path / 'nope.yaml'}: cannot read: does not exist"
    res = run_station("report", str(tmp_path / "gone"))
    assert res.returncode == 2 and res.stderr.strip() == f"error: {tmp_path / 'gone'} does not exist"
    (tmp_path / "empty").mkdir()
    res = run_station("report", str(tmp_path / "empty"))
    assert res.returncode == 2 and "is not a campaign directory (no runs/ inside)" in res.stderr


@pytest.mark.parametrize("typo, where, meant", [("samles", "matrix", "samples"), ("sed", "bench.twin", "seed"),
                                                 ("trigger_levle", "bench.scope", "trigger_level")])
def test_a_mistyped_key_gets_a_did_you_mean_from_its_own_section(typo, where, meant) -> None:
    from station.config import parse_campaign

    demo = (REPO / "configs/rtai-lpt-vs-pcie.yaml").read_text()
    right = {"samples": "  samples: ", "seed": "    seed: 2015", "trigger_level": "    trigger_level: "}[meant]
    assert right in demo
    with pytest.raises(ConfigError, match=rf"{re.escape(where)}\.{typo}: unknown key \(did you mean '{meant}'\?"):
        parse_campaign(demo.replace(right, right.replace(meant, typo), 1), "demo.yaml")
    with pytest.raises(ConfigError, match=r"zzqx: unknown key \(check the spelling"):
        parse_campaign(demo.replace(right, right.replace(meant, "zzqx"), 1), "demo.yaml")


def test_the_cli_lists_the_choices_it_takes(tmp_path) -> None:
    """--format, --interface, --variant and --kernel list their choices in --help, and a value
    outside them is refused naming them (exit 2), before anything is read or written."""
    from tests.conftest import run_station

    help_text = run_station("import", "--help").stdout
    for choices in ("auto|legacy|v1|cyclictes", "<lpt|pcie>", "<inb|no-inb>"):
        assert choices in help_text, help_text
    assert "<regular|rt>" in run_station("vm", "up", "--help").stdout
    res = run_station("import", str(tmp_path / "x.bin"), "--out", str(tmp_path / "out"), "--variant", "inb2")
    assert res.returncode == 2 and "'inb2' is not one of 'inb', 'no-inb'" in res.stderr
    assert not (tmp_path / "out").exists()


def _commands(command, path=()):  # noqa: ANN001, ANN202 - the CLI's command tree
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_no_option_in_any_help_shows_a_bare_type_and_the_twin_lists_its_choices() -> None:
    """Every command's --help, as a user reads it: a flag shows no value (not <bool>), a value
    says what it is (<duration>, <voltage>, …), not <str>, nor an argument <str> or <list[Path]>;
    the standalone twin lists its dialects
    and buses, the ones its scope plays (instruments/sim)."""
    import typer
    from typer.testing import CliRunner

    from instruments.sim.bus import BUSES
    from instruments.sim.server import DIALECTS
    from station import cli

    runner = CliRunner()
    paths = list(_commands(typer.main.get_command(cli.app)))
    assert ("scope", "capture") in paths and ("vm", "up") in paths
    for path in paths:
        text = runner.invoke(cli.app, [*path, "--help"], env={"COLUMNS": "200"}).output
        options = [line for line in text.splitlines() if "--" in line]
        assert options, (path, text)
        # options and arguments alike: an argument's name says what it is (no <str> beside RESOURCE)
        bare = [line for line in text.splitlines() if any(t in line for t in ("<bool>", "<str>", "<list["))]
        assert not bare, (path, bare)
    twin = runner.invoke(cli.app, ["twin", "--help"], env={"COLUMNS": "200"}).output
    assert f"<{'|'.join(sorted(DIALECTS))}>" in twin
    assert {b.value for b in cli.TwinBus} == {"model", *BUSES}
    assert f"<{'|'.join(b.value for b in cli.TwinBus)}>" in twin


def test_validate_says_how_long_the_campaign_measures() -> None:
    """The demo: 4 runs of 100 000 samples at 100 µs, 10 s each (max_duration 2 min); seed 004:
    twenty 1 h cases (five loads × four kernels, max_duration 70 min), the ~20 h a user must know
    before starting it."""
    from tests.conftest import run_station

    demo = run_station("validate", str(REPO / "configs/rtai-lpt-vs-pcie.yaml"))
    assert demo.returncode == 0 and "measuring time: about 40 s (10 s a run), at most 8 min 00 s" in demo.stdout
    seed = run_station("validate", str(REPO / "configs/cyclictest-rt-vs-regular.yaml"))
    assert "about 20 h 00 min (1 h 00 min a run), at most 23 h 20 min" in seed.stdout, seed.stdout


def test_the_campaign_eta_counts_the_runs_still_to_come(monkeypatch) -> None:
    """The live progress's campaign-wide time left: this run's rest plus each later run at the
    finished runs' pace (or this run's whole, before any finished); none after the last run. The
    clock is the test's (a stalled machine between two lines cannot move it)."""
    from types import SimpleNamespace

    from station.common import progress
    from station.common.progress import RunProgress

    now = 1_000.0
    monkeypatch.setattr(progress, "time", SimpleNamespace(monotonic=lambda: now))  # this module's clock only
    first = RunProgress("a", 0, 3, started=now - 10, session_started=now - 10, session_done=0, session_left=2)
    assert first.campaign_left_s(30.0) == pytest.approx(30 + 2 * 40, abs=0.5)  # 10 s in, 30 to go: 40 a run
    later = RunProgress("c", 2, 4, started=now - 5, session_started=now - 125, session_done=2, session_left=1)
    assert later.campaign_left_s(55.0) == pytest.approx(55 + 60, abs=0.5)  # two done in 120 s: 60 a run
    assert RunProgress("z", 3, 4, started=now, session_started=now, session_left=0).campaign_left_s(5.0) == 5.0
