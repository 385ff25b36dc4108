"""The campaign's interruptions options: refused with file:line when they make no sense, and
every value that reaches the target's shell one quoted word of the detector's command line."""

from __future__ import annotations

import shlex
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from station.kinds.interruptions.on_target import arguments, host_binary
from station.kinds.interruptions.settings import InterruptionsSettings
from tests.test_cyclictest_options import refused

BASE = ("name: c\nbench:\n  target: {kind: local}\n  scope: {kind: none}\n"
        "matrix: {kind: interruptions, loads: [none], duration: 2s}\n")


@pytest.mark.parametrize("extra, line, field, words", [
    ("interruptions: {threshold: 10ns}\n", 6, "interruptions.threshold", "too small"),
    ("interruptions: {threshold: 2}\n", 6, "interruptions.threshold", "unit"),
    ("interruptions: {cpu: '1;reboot'}\n", 6, "interruptions.cpu", ""),
    ("interruptions: {cpu: -1}\n", 6, "interruptions.cpu", ""),
    ("interruptions: {priority: 100}\n", 6, "interruptions.priority", ""),
    ("interruptions: {clock: rdtscp}\n", 6, "interruptions.clock", ""),
    ("interruptions: {trace: maybe}\n", 6, "interruptions.trace", ""),
    ("interruptions: {thresold: 2us}\n", 6, "interruptions.thresold", ""),
])
def test_nonsense_options_are_refused_with_their_line(extra, line, field, words):
    message = refused(BASE + extra)
    assert message.startswith(f"c.yaml:{line}: {field}"), message
    assert words in message


def test_what_does_not_fit_an_interruptions_campaign_is_refused():
    assert "c.yaml:5: matrix.period: is a module-run key" in refused(BASE.replace("2s}", "2s, period: 100us}"))
    twin = refused(BASE.replace("kind: local", "kind: twin"))
    assert "c.yaml:3: bench.target.kind: an interruptions run measures a real kernel" in twin
    assert "matrix.duration: the detector takes whole seconds" in refused(BASE.replace("2s}", "1500ms}"))
    assert "matrix.samples: the detector runs for matrix.duration" in refused(BASE.replace("2s}", "2s, samples: 9}"))
    assert "max_duration is 1 s" in refused(BASE.replace("2s}", "2s, max_duration: 1s}"))
    cyclic = "name: m\nmatrix: {kind: cyclictest, duration: 2s}\ninterruptions: {cpu: 1}\n"
    assert refused(cyclic).startswith("c.yaml:3: interruptions: interruptions options are for matrix.kind: "
                                      "interruptions")


@settings(max_examples=200, deadline=None)
@given(st.builds(InterruptionsSettings, cpu=st.one_of(st.just("last"), st.integers(0, 4095)),
                 threshold=st.integers(100, 100_000_000).map(lambda ns: ns / 1e9),
                 priority=st.integers(0, 99), clock=st.sampled_from(["auto", "tsc", "monotonic"]),
                 counts=st.sampled_from(["auto", True, False])),
       st.integers(0, 4095), st.integers(1, 100_000), st.sampled_from([None, "/dev/cpu/3/msr", "/tmp/a b;c"]),
       st.booleans())
def test_every_option_is_one_shell_word(s, cpu, duration, msr, traced):
    args = arguments(s, cpu=cpu, duration_s=duration, msr=msr, traced=traced)
    assert shlex.split(shlex.join(["irqgap", *args]))[1:] == args
    assert args[args.index("--cpu") + 1] == str(cpu)
    assert int(args[args.index("--threshold-ns") + 1]) == round(s.threshold * 1e9)
    # counts are read unless told not to, or (auto) the trace says what ran
    assert ("--no-counts" in args) == (s.counts is False or (s.counts == "auto" and traced))


def test_the_options_mean_to_the_real_program_what_the_schema_says(tmp_path):
    s = InterruptionsSettings(threshold=3e-6, priority=0, clock="monotonic", counts=False)
    args = arguments(s, cpu=0, duration_s=1, msr=None)
    out = subprocess.run([str(host_binary()), *args, "--no-mlock"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    header = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert header["cpu"] == "0" and header["threshold_ns"] == "3000" and header["priority"] == "0"
    assert header["clock"] == "monotonic" and header["smi"].startswith("unavailable")
    assert not any(line.startswith("irq ") for line in out.stdout.splitlines())  # counts: false
    assert out.stdout.splitlines()[-1].endswith("duration")


def test_a_tool_that_fails_to_build_says_the_compilers_error_and_leaves_no_file(tmp_path, monkeypatch):
    """A target tool is built here on first use (station/target/tools.py), written whole or not
    at all: a source gcc refuses gives the compiler's own message and leaves the cache empty (no
    half-written binary or temporary a later run would take); the fixed source then builds."""
    from station.target import tools

    src = tmp_path / "tools" / "broken.c"
    src.parent.mkdir()
    src.write_text("int main(void) { return undeclared_thing; }\n")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr("station.vm.latency_modules.module_sources", lambda: tmp_path)
    tool = tools.Tool("broken")
    with pytest.raises(tools.TargetError, match="undeclared_thing") as err:
        tool.host_binary()
    assert "building broken here with gcc failed" in str(err.value)
    assert list(tool.cache_dir().iterdir()) == []
    src.write_text("int main(void) { return 3; }\n")
    built = tools.Tool("broken").host_binary()
    assert list(tool.cache_dir().iterdir()) == [built]
    assert subprocess.run([str(built)], check=False).returncode == 3
