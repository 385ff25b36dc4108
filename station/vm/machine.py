"""One QEMU guest running the image, in the background, reachable over SSH on 127.0.0.1:<port>.

Its state (pid, port, paths, timings) is written to <state_dir>/vm.json so another process, such as
`station vm down`, can find and stop it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import asyncssh

from station.common.lifetime import die_with_parent
from station.vm.errors import VmError
from station.vm.image import VmImage
from station.vm.initramfs import INIT_MARKER, SSHD_MARKER

T = TypeVar("T")
HOST = "127.0.0.1"
STATE_FILE = "vm.json"
# loglevel=5: the console log holds warnings and worse (a soft lockup's backtrace is a warning), not
# boot chatter; all-CPU backtraces: a lockup shows what every vCPU was doing; panic=-1 + -no-reboot:
# a panic ends QEMU instead of hanging; trust_cpu: no wait for entropy.
KERNEL_CMDLINE = (
    "console=ttyS0 loglevel=5 softlockup_all_cpu_backtrace=1 random.trust_cpu=on panic=-1"
)
# room for `stressapptest -M 256` beside the initramfs (held in RAM) and the loads
MEMORY_MIB = 1024
# cyclictest -t -a runs a thread per CPU; two vCPUs cost little boot time under TCG (docs/vm.md)
CPUS = 2
# one host thread runs every vCPU in turn: with a thread per vCPU (multi) QEMU 7.2's x86 guest hangs
# when its kernel patches its own text (a trace event switched on or off: text_poke_bp waits for the
# other vCPU's answer to an IPI that never comes; soft lockups on both CPUs): 3 of 3 loops of event
# switching hung within 130 cycles with multi, none in 400 with single (docs/vm.md)
TCG_THREADS = "single"


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run coro to completion from sync code, also when the caller is itself inside an event
    loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _pid_state(pid: int) -> str | None:
    """The process state letter from /proc (R, S, Z, ...), None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[0]


class VirtualMachine:
    def __init__(
        self,
        image: VmImage,
        ssh_port: int = 10022,
        state_dir: Path | None = None,
        die_with_caller: bool = False,
        *,
        memory_mib: int = MEMORY_MIB,
        cpus: int = CPUS,
        tcg_threads: str = TCG_THREADS,
    ) -> None:
        if tcg_threads not in ("single", "multi"):
            raise ValueError(f"tcg_threads={tcg_threads!r}: accepted single or multi")
        self.image = image
        self.tcg_threads = tcg_threads
        self.memory_mib = memory_mib
        self.cpus = cpus
        # a campaign's VM must not outlive a station killed with SIGKILL (nobody would find it)
        self.die_with_caller = die_with_caller
        self.ssh_port = ssh_port
        # default: the image's own directory, where `station vm down` looks
        # (from_state(default_vm_dir())); absolute: the path is how a later process recognises our
        # QEMU among others (is_running)
        self.state_dir = Path(state_dir or image.dir).resolve()
        self.timings: dict[str, float] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._pid: int | None = None

    # -- where things are ------------------------------------------------------------------------
    @property
    def console_log(self) -> Path:
        return self.state_dir / "console.log"

    @property
    def qemu_log(self) -> Path:
        return self.state_dir / "qemu.log"

    @property
    def known_hosts_file(self) -> Path:
        return self.state_dir / "known_hosts"

    @property
    def state_file(self) -> Path:
        return self.state_dir / STATE_FILE

    @property
    def pid(self) -> int | None:
        return self._pid

    def qemu_command(self) -> list[str]:
        arm64 = self.image.arch == "arm64"
        return [
            "qemu-system-aarch64" if arm64 else "qemu-system-x86_64",
            # TCG: no KVM on the machines this runs on, and timings are emulated either way
            "-accel", f"tcg,thread={self.tcg_threads}",
            # threads named ("CPU 1/TCG", single: "ALL CPUs/TCG"): a host tool (or a test's stealer)
            # can find a vCPU's thread
            "-name", "irq-station-vm,debug-threads=on",
            # arm64: QEMU's `virt` board (PCIe, a PL011 UART, GICv3) and pointer authentication
            # with QEMU's cheap algorithm (the architected QARMA costs most of an emulated arm64
            # kernel's time)
            *(["-machine", "virt,gic-version=3", "-cpu", "max,pauth-impdef=on"] if arm64 else
              ["-machine", "q35", "-cpu", "max"]),
            "-m", str(self.memory_mib),
            "-smp", str(self.cpus),
            "-display", "none",
            *([] if arm64 else ["-vga", "none"]),
            "-no-reboot",
            "-kernel", str(self.image.kernel_path),
            "-initrd", str(self.image.initrd_path),
            "-append", KERNEL_CMDLINE.replace("ttyS0", "ttyAMA0") if arm64 else KERNEL_CMDLINE,
            "-netdev", f"user,id=n0,hostfwd=tcp:{HOST}:{self.ssh_port}-:22",
            # autonegotiation off: the emulated link is up at once instead of ~2.5 s after
            # `ip link set up`
            "-device", "e1000,netdev=n0,autonegotiation=off",
            # the PCIe module's emulated target (1234:11e8)
            "-device", "edu",
            # keeps the ISA parallel port at 0x378 / IRQ 7 for the LPT module, with nothing
            # attached (`virt` has no ISA bus: no LPT on arm64)
            *([] if arm64 else ["-parallel", "null"]),
            "-serial", f"file:{self.console_log}",
            "-monitor", "none",
        ]  # fmt: skip

    def ssh_command(self, *remote: str) -> list[str]:
        """OpenSSH client command line for this VM (key and pinned host key), e.g. for
        `station vm ssh`."""
        return [
            "ssh",
            "-i", str(self.image.identity_file),
            "-p", str(self.ssh_port),
            "-o", f"UserKnownHostsFile={self.known_hosts_file}",
            "-o", "StrictHostKeyChecking=yes",
            "-o", "IdentitiesOnly=yes",
            f"root@{HOST}",
            *remote,
        ]  # fmt: skip

    def is_running(self) -> bool:
        """True while our QEMU process exists (a zombie counts as gone)."""
        if self._pid is None:
            return False
        if self._proc is not None:
            # our child: its exit status is the truth (right after fork, /proc shows our own
            # cmdline)
            return self._proc.poll() is None
        state = _pid_state(self._pid)
        if state in (None, "Z", "X"):
            return False
        # the pid may have been reused after a crash: it must be QEMU writing our console log
        try:
            cmdline = Path(f"/proc/{self._pid}/cmdline").read_bytes()
        except OSError:
            return False
        return b"qemu-system" in cmdline and str(self.console_log).encode() in cmdline

    # -- state shared with other processes --------------------------------------------------------
    def _write_state(self) -> None:
        state = {
            "pid": self._pid,
            "ssh_port": self.ssh_port,
            "host": HOST,
            "user": "root",
            "image_dir": str(self.image.dir),
            "kernel_release": self.image.kernel_release,
            "kernel_flavour": self.image.flavour,
            "arch": self.image.arch,
            "memory_mib": self.memory_mib,
            "cpus": self.cpus,
            "identity_file": str(self.image.identity_file),
            "known_hosts": str(self.known_hosts_file),
            "console_log": str(self.console_log),
            "timings": self.timings,
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_file)

    @classmethod
    def from_state(cls, state_dir: Path) -> VirtualMachine:
        """The VM another process started with this state_dir (it may have stopped since:
        is_running())."""
        path = Path(state_dir) / STATE_FILE
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise VmError(
                f"no VM state in {state_dir} ({exc.__class__.__name__}: {path})"
            ) from None
        vm = cls(
            VmImage(Path(state["image_dir"])),
            ssh_port=int(state["ssh_port"]),
            state_dir=Path(state_dir),
            memory_mib=int(state.get("memory_mib", MEMORY_MIB)),
            cpus=int(state.get("cpus", CPUS)),
        )
        vm._pid = int(state["pid"])
        vm.timings = dict(state.get("timings") or {})
        return vm

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self, timeout_s: float = 180) -> None:
        """Boot in the background and return once SSH answers with our key and the pinned host
        key."""
        _run(self.start_async(timeout_s))

    async def start_async(self, timeout_s: float = 180) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self.state_file.exists():
            with contextlib.suppress(VmError):
                other = VirtualMachine.from_state(self.state_dir)
                if other.is_running():
                    raise VmError(
                        f"a VM is already running from {self.state_dir} (pid {other.pid}, port "
                        f"{other.ssh_port}); stop it first (station vm down)"
                    )
        if self.is_running():
            return
        for needed in (self.image.kernel_path, self.image.initrd_path, self.image.identity_file):
            if not needed.is_file():
                raise VmError(f"image incomplete: {needed} is missing (rebuild with build_image)")
        self._check_port_free()
        self.known_hosts_file.write_text(f"[{HOST}]:{self.ssh_port} {self.image.host_key_pub}\n")
        self.console_log.write_bytes(b"")
        self.timings = {}
        t0 = time.monotonic()
        with open(self.qemu_log, "wb") as qlog:
            try:
                self._proc = subprocess.Popen(
                    self.qemu_command(),
                    stdin=subprocess.DEVNULL,
                    stdout=qlog,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # outlives `station vm up` and the terminal's Ctrl-C
                    preexec_fn=die_with_parent if self.die_with_caller else None,
                )
            except FileNotFoundError:
                package = "qemu-system-arm" if self.image.arch == "arm64" else "qemu-system-x86"
                raise VmError(
                    f"{self.qemu_command()[0]} not found (apt-get install {package})"
                ) from None
        self._pid = self._proc.pid
        self._write_state()
        try:
            await self._wait_ready(t0, timeout_s)
        except BaseException:
            self._kill()
            raise
        self._write_state()

    def _check_port_free(self) -> None:
        with socket.socket() as s:
            # as QEMU binds it: TIME_WAIT leftovers of an earlier VM on this port do not count
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((HOST, self.ssh_port))
            except OSError as exc:
                raise VmError(f"{HOST}:{self.ssh_port} is in use ({exc.strerror}): choose another "
                              "ssh_port") from None

    def _why_not(self, what: str) -> str:
        qemu = self.qemu_log.read_text(errors="replace").strip() if self.qemu_log.exists() else ""
        return (
            f"{what}\nqemu: {qemu[-1500:] or '(nothing)'}\nconsole "
            f"({self.console_log}):\n{self.console_tail()}"
        )

    def console_tail(self, lines: int = 25) -> str:
        try:
            text = self.console_log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    async def _wait_ready(self, t0: float, timeout_s: float) -> None:
        deadline = t0 + timeout_s
        marker = re.compile(re.escape(INIT_MARKER) + r" ([0-9.]+) s")
        attempts = 0
        while True:
            now = time.monotonic()
            if not self.is_running():
                raise VmError(self._why_not(f"QEMU exited during boot (code {self._proc.poll()})"))
            if "boot_to_init_s" not in self.timings:
                m = marker.search(self.console_log.read_text(errors="replace"))
                if m:
                    self.timings["boot_to_init_s"] = round(now - t0, 2)
                    self.timings["guest_uptime_at_init_s"] = float(m.group(1))
            if now > deadline:
                raise VmError(self._why_not(f"SSH on {HOST}:{self.ssh_port} did not answer within "
                                            f"{timeout_s:g} s"))
            # before dropbear runs, a connect hangs in slirp's SYN retries instead of failing: wait
            # for it
            if SSHD_MARKER in self.console_log.read_text(errors="replace"):
                attempts += 1
                # short first tries (a handshake takes well under a second), longer ones on a slow
                # host
                if await self._ssh_answers(min(2.0 * attempts, 10.0, deadline - now)):
                    self.timings["to_ssh_s"] = round(time.monotonic() - t0, 2)
                    self.timings["ssh_attempts"] = attempts
                    return
            await asyncio.sleep(0.2)

    def connect_options(self) -> dict[str, Any]:
        """asyncssh.connect keyword arguments for this VM."""
        return {
            "host": HOST,
            "port": self.ssh_port,
            "username": "root",
            "client_keys": [str(self.image.identity_file)],
            "known_hosts": str(self.known_hosts_file),
        }

    async def _ssh_answers(self, timeout: float) -> bool:
        # hostfwd accepts TCP before the guest listens: only a completed, authenticated handshake
        # counts
        try:
            async with asyncssh.connect(**self.connect_options(), connect_timeout=max(timeout,
                                                                                      0.5)) as conn:
                await conn.run("true", check=True)
            return True
        except asyncssh.HostKeyNotVerifiable as exc:
            raise VmError(
                f"the VM's host key does not match {self.known_hosts_file}: {exc.reason}"
            ) from None
        except (OSError, TimeoutError, asyncssh.Error):
            return False

    def stop(self, timeout_s: float = 30) -> None:
        """`poweroff -f` over SSH, wait for QEMU to exit, kill it if it does not. Safe to call
        twice."""
        if self.is_running():
            _run(self._poweroff())
            if not self._wait_exit(timeout_s):
                self._kill()
        self._reap()
        self.state_file.unlink(missing_ok=True)

    async def _poweroff(self) -> None:
        with contextlib.suppress(OSError, TimeoutError, asyncssh.Error):
            async with asyncssh.connect(**self.connect_options(), connect_timeout=5) as conn:
                # the connection dies with the guest: do not wait for an exit status
                proc = await conn.create_process("sync; poweroff -f")
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(3):
                        await proc.wait_closed()

    def _wait_exit(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while self.is_running():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.1)
        return True

    def _kill(self) -> None:
        """SIGTERM (QEMU exits cleanly on it), then SIGKILL."""
        for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
            if not self.is_running() or self._pid is None:
                break
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, sig)
            self._wait_exit(grace)
        self._reap()

    def _reap(self) -> None:
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=5)

    def __enter__(self) -> VirtualMachine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
