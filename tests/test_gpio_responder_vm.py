"""The GPIO responders of seed 002 in the QEMU VM (Debian's kernel), against the test-only GPIO chip
gpio_testchip.ko (target_modules/linux/gpio_testchip.c): its input line is driven through debugfs and
raises its interrupt through gpiolib's own irqchip path, its output line's level and changes are read
back. Each responder must answer every edge driven, the way its mode says:
- the kernel module gpio_responder.ko, echo and toggle, hard IRQ and threaded, every edge kind;
- the user-space gpio_responder_user (built here, static against libgpiod.a, uploaded like irqgap),
  on the GPIO character device and on the legacy sysfs interface.
A functional check only: emulated time says nothing of response times, so nothing here is timed."""

from __future__ import annotations

import asyncio
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import asyncssh
import pytest

from tests.conftest import REPO, missing
from tests.test_vm_campaign import vm  # noqa: F401 - fixture: a VM booted once for this module

MODULES = "/opt/irq-station/modules"
DEBUGFS = "/sys/kernel/debug/irqstation-testchip"
CHIP = "irqstation-test"
EDGES = 200
# reads of the output before an answer counts as missing (each a few tens of µs under TCG: a missing
# answer costs a minute, but a slow, shared CI machine never fails an answer that came)
SPINS = 1_000_000
KERNEL_PROBLEMS = re.compile(r"WARNING:|BUG:|Oops|Call Trace|general protection|refcount_t|list_del corruption")
USER_BINARY = "/tmp/gpio_responder_user"


def _guest(vm, script: str, timeout: float = 120) -> asyncssh.SSHCompletedProcess:  # noqa: F811
    async def run():
        async with asyncssh.connect(**vm.connect_options()) as conn:
            return await conn.run(script, check=False, timeout=timeout)
    return asyncio.run(run())


def _answered(edge: str) -> tuple[str, str]:
    """Shell expressions of i (1-based edge count; odd edges rise, even ones fall): how many edges
    so far the responder answers, and the input level after edge i."""
    return {"both": "$i", "rising": "$(( (i + 1) / 2 ))", "falling": "$(( i / 2 ))"}[edge], "$(( i % 2 ))"


def _drive(edge: str, mode: str, edges: int = EDGES, counter: str = "") -> str:
    """Guest shell: drive `edges` edges on line 0 and after each wait until the output shows the answer
    (echo: the output's level is the input's as of the last answered edge; toggle: the output changed
    once per answered edge). Prints one `result` line of counts; bad is the first edge whose answer
    never came, 0 if none. `counter`: a file counting the responder's answers, awaited first — an
    echo that reads the input's level must have run before the next edge changes it (a level already
    right from the previous answer proves nothing about this one)."""
    answered, level = _answered(edge)
    if mode == "echo":
        # the level of the last answered edge: rising edges leave 1, falling ones 0 (the output starts
        # at the input's level at load, 0)
        want = {"both": level, "rising": "1", "falling": "0"}[edge]
        watch = "out"
    else:
        want, watch = answered, "out_changes"
    counted = (f'while read got < {counter}; [ "$got" != "{answered}" ]; do '
               f'n=$((n + 1)); [ $n -ge {SPINS} ] && break; done') if counter else ""
    return f"""
D={DEBUGFS}
bad=0; maxn=0; i=0
while [ $i -lt {edges} ]; do
	i=$((i + 1))
	echo $(( i % 2 )) > $D/in
	want={want}
	n=0
	{counted}
	while read got < $D/{watch}; [ "$got" != "$want" ]; do
		n=$((n + 1)); [ $n -ge {SPINS} ] && break
	done
	[ $n -gt $maxn ] && maxn=$n
	# one missing answer is enough: stop there rather than wait for each of the rest
	[ "$got" = "$want" ] || {{ bad=$i; break; }}
done
read edges < $D/edges; read raised < $D/raised; read changes < $D/out_changes; read out < $D/out
echo "result bad=$bad maxn=$maxn edges=$edges raised=$raised changes=$changes out=$out"
"""


def _result(stdout: str) -> dict[str, int]:
    line = next((ln for ln in stdout.splitlines() if ln.startswith("result ")), None)
    assert line, f"no result line in:\n{stdout}"
    return {k: int(v) for k, v in (kv.split("=") for kv in line.split()[1:])}


def _expected(edge: str, mode: str, edges: int = EDGES) -> tuple[int, int]:
    """(edges answered, output changes) after `edges` alternating edges starting with a rising one."""
    answered = {"both": edges, "rising": (edges + 1) // 2, "falling": edges // 2}[edge]
    if mode == "toggle":
        return answered, answered
    # echo: the output takes the input's level at each answered edge; from 0, rising edges set it to 1
    # once, falling ones keep it at 0
    return answered, {"both": edges, "rising": 1 if edges else 0, "falling": 0}[edge]


@pytest.fixture(scope="module")
def guest(vm):  # noqa: F811
    res = _guest(vm, "mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug; dmesg -c >/dev/null")
    assert res.exit_status == 0, res.stderr
    return vm


def _no_kernel_problems(vm, since: str = "") -> str:  # noqa: F811
    """dmesg (cleared) has no warning or oops; returns what it said."""
    log = _guest(vm, "dmesg -c").stdout
    bad = [ln for ln in log.splitlines() if KERNEL_PROBLEMS.search(ln)]
    assert bad == [], f"kernel problems{since}:\n{log}"
    return log


def _unloaded(vm) -> None:  # noqa: F811
    mods = _guest(vm, "cat /proc/modules").stdout
    loaded = {ln.split()[0] for ln in mods.splitlines() if ln.strip()}
    assert not loaded & {"gpio_responder", "gpio_testchip"}, mods


# the global GPIO number of the test chip's first line, from the legacy sysfs interface
CHIP_BASE = f"""$(for c in /sys/class/gpio/gpiochip*; do [ "$(cat $c/label)" = {CHIP} ] && cat $c/base; done)"""


def _drive_in(guest, script: str, edge: str, mode: str, record_property) -> tuple:  # noqa: ANN001
    """Run a script that drives the edges; (its result, the counts, answered edges, output changes
    expected), every edge answered."""
    res = _guest(guest, script)
    assert res.exit_status == 0, f"{res.stdout}\n{res.stderr}"
    got = _result(res.stdout)
    answered, changes = _expected(edge, mode)
    record_property("result", got)
    assert got["bad"] == 0, got
    return res, got, answered, changes


@pytest.mark.parametrize(("mode", "threaded", "edge", "lines"), [
    ("echo", 0, "both", "chip"), ("echo", 1, "both", "chip"), ("toggle", 0, "both", "chip"),
    ("toggle", 1, "both", "chip"), ("toggle", 0, "rising", "chip"), ("toggle", 1, "falling", "chip"),
    ("echo", 1, "rising", "chip"), ("echo", 0, "both", "numbers"),
])
def test_kernel_responder_answers_every_edge(guest, mode, threaded, edge, lines, record_property):
    # lines by chip label and offsets, or (the fallback) by global GPIO numbers
    where = f"chip={CHIP} in=0 out=1" if lines == "chip" else "gpio_in=$B gpio_out=$((B + 1))"
    params = f"{where} edge={edge} mode={mode} threaded={threaded}"
    script = f"""
set -e
insmod {MODULES}/gpio_testchip.ko
B={CHIP_BASE}
insmod {MODULES}/gpio_responder.ko {params}
grep -q ' gpio_responder$' /proc/interrupts
set +e
{_drive(edge, mode, counter="/sys/module/gpio_responder/parameters/handled")}
read handled < /sys/module/gpio_responder/parameters/handled
echo "handled=$handled"
rmmod gpio_testchip 2>/dev/null && echo "testchip went while its lines were held"
rmmod gpio_responder && rmmod gpio_testchip
"""
    res, got, answered, changes = _drive_in(guest, script, edge, mode, record_property)
    assert got["edges"] == EDGES
    assert got["raised"] == answered, "the chip raised an interrupt for every edge of the requested kind"
    assert f"handled={answered}" in res.stdout, res.stdout
    assert got["changes"] == changes, got
    if not threaded:
        # the hard handler runs before the debugfs write returns: the answer is there at the first read
        assert got["maxn"] == 0, got
    assert "testchip went" not in res.stdout, "gpio_testchip unloaded under its consumer"
    _unloaded(guest)
    log = _no_kernel_problems(guest, f" after {params}")
    assert f"gpio_responder: unloaded: {answered} interrupts handled" in log, log


def test_kernel_responder_refuses_bad_loads_with_a_reason(guest):
    cases = [
        ("chip=no-such-chip in=0 out=1", 'no GPIO chip labelled "no-such-chip"'),
        (f"chip={CHIP} in=0 out=7", "offset 7 is not a line of chip"),
        (f"chip={CHIP} in=0 out=0", "are the same line"),
        (f"chip={CHIP} in=0", "needs in=<offset> and out=<offset>"),
        (f"chip={CHIP} in=0 out=1 edge=sideways", "edge=sideways unknown"),
        (f"chip={CHIP} in=0 out=1 mode=mirror", "mode=mirror unknown"),
        (f"chip={CHIP} in=1 out=0", "cannot make the in line an input"),
        ("", "no lines given"),
        ("gpio_in=3 gpio_out=4", "no GPIO chip has global GPIO 3"),
        (f"chip={CHIP} in=0 out=1 gpio_in=3", "not both"),
    ]
    script = [f"insmod {MODULES}/gpio_testchip.ko || exit 1"]
    for params, _ in cases:
        script.append(f"echo '== {params}'; insmod {MODULES}/gpio_responder.ko {params} && echo LOADED; "
                      "dmesg -c | grep gpio_responder")
    # a chip whose accessors may sleep: refused in hard IRQ context, answered from the IRQ thread
    script += ["rmmod gpio_testchip", f"insmod {MODULES}/gpio_testchip.ko can_sleep=1 || exit 1",
               f"echo '== sleeping'; insmod {MODULES}/gpio_responder.ko chip={CHIP} in=0 out=1 && echo LOADED; "
               "dmesg -c | grep gpio_responder",
               f"insmod {MODULES}/gpio_responder.ko chip={CHIP} in=0 out=1 threaded=1 mode=toggle || exit 1",
               _drive("both", "toggle", edges=20), "rmmod gpio_responder; rmmod gpio_testchip"]
    res = _guest(guest, "\n".join(script))
    assert res.exit_status == 0, f"{res.stdout}\n{res.stderr}"
    blocks = dict(b.split("\n", 1) if "\n" in b else (b, "") for b in res.stdout.split("== ")[1:])
    for params, reason in cases:
        out = blocks[params]
        assert "LOADED" not in out, params
        assert reason in out, f"{params}: {out!r}"
    assert "LOADED" not in blocks["sleeping"]
    assert "can sleep" in blocks["sleeping"] and "load with threaded=1" in blocks["sleeping"]
    got = _result(res.stdout)
    assert (got["bad"], got["raised"], got["changes"]) == (0, 20, 20), got
    _unloaded(guest)
    _no_kernel_problems(guest)


@pytest.fixture(scope="module")
def user_binary(guest, tmp_path_factory) -> str:
    """gpio_responder_user, static against libgpiod.a (the VM has no libgpiod), in the guest."""
    if shutil.which("gcc") is None:
        missing("gcc missing (apt-get install gcc)")
    if not list(Path("/usr/lib").glob("*/libgpiod.a")) or not Path("/usr/include/gpiod.h").is_file():
        missing("libgpiod-dev missing (apt-get install libgpiod-dev, or target_modules/scripts/ci-deps.sh)")
    out = tmp_path_factory.mktemp("gpio-user") / "tools"
    shutil.copytree(REPO / "target_modules" / "tools", out)
    res = subprocess.run(["make", "-C", str(out), "gpio_responder_user-static"], capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    data = (out / "gpio_responder_user-static").read_bytes()

    async def upload():
        async with asyncssh.connect(**guest.connect_options()) as conn:
            async with conn.start_sftp_client() as sftp, sftp.open(USER_BINARY + ".part", "wb") as f:
                await f.write(data)
            await conn.run(f"chmod 755 {USER_BINARY}.part && mv {USER_BINARY}.part {USER_BINARY}", check=True)
    asyncio.run(upload())
    return USER_BINARY


@pytest.mark.parametrize(("how", "mode", "edge"), [
    ("chardev", "echo", "both"), ("chardev", "toggle", "both"), ("chardev", "toggle", "falling"),
    ("sysfs", "echo", "both"), ("sysfs", "toggle", "rising"),
])
def test_user_responder_answers_every_edge(guest, user_binary, how, mode, edge, record_property):
    args = ["--chip", CHIP, "--in", "0", "--out", "1", "--mode", mode, "--edge", edge, "--priority", "50",
            "--cpu", "1"] + (["--sysfs"] if how == "sysfs" else [])
    cmd = " ".join(shlex.quote(a) for a in [user_binary, *args])
    script = f"""
insmod {MODULES}/gpio_testchip.ko || exit 1
rm -f /tmp/responder.out  # the previous case's "ready" must not pass for this one's
{cmd} > /tmp/responder.out 2>&1 < /dev/null &
p=$!
trap 'kill $p 2>/dev/null' EXIT
n=0
until grep -qs ': ready' /tmp/responder.out; do
	n=$((n + 1)); [ $n -lt 200 ] && kill -0 $p 2>/dev/null || {{ cat /tmp/responder.out; exit 1; }}
	sleep 0.05
done
ls /sys/class/gpio | tr '\\n' ' '; echo
{_drive(edge, mode)}
kill -TERM $p; wait $p; echo "exit=$?"
trap - EXIT
cat /tmp/responder.out
echo "after: $(ls /sys/class/gpio | tr '\\n' ' ')"
rmmod gpio_testchip
"""
    res, got, answered, changes = _drive_in(guest, script, edge, mode, record_property)
    assert (got["edges"], got["raised"], got["changes"]) == (EDGES, answered, changes), got
    assert "exit=0" in res.stdout, res.stdout
    assert f"handled {answered} edges, stopped by Terminated" in res.stdout, res.stdout
    after = next(ln for ln in res.stdout.splitlines() if ln.startswith("after: "))
    assert not re.search(r"\bgpio\d+\b", after), f"lines left exported: {after}"
    if how == "sysfs":
        assert re.search(r"\bgpio\d+ gpio\d+\b", res.stdout), "the sysfs responder exported both lines"
    _unloaded(guest)
    _no_kernel_problems(guest, f" after the user responder {args}")
