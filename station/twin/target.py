"""The emulated RTAI target behind the twin's SSH server.

It understands the command vocabulary the station (and a person poking at it
by hand) uses on a real target: uname, cat of /proc and /sys files and of the
record stream device, lsmod, insmod with parameters, rmmod, ls, mkdir, rm,
kill, nproc, and the load wrapper `setsid sh -c 'echo $$ > PIDFILE; exec
timeout -s KILL N CMD'`. Loads behave like real processes started without a
pty: closing their SSH channel does not stop them; only a kill (or their
timeout) does, which is why the station keeps pid files and cleans up.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import platform
import shlex
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from station.common import module_names
from station.common.module_names import vermagic
from station.parsers import records
from station.twin.board_target import (
    GOVERNOR_DIR,
    GOVERNOR_FILE,
    PI_CPUS,
    PI_MODULES,
    PI_RELEASE,
    RESPONDER_MODULE,
    BoardError,
    BoardTarget,
)
from station.twin.clock import DriftingClock, Slew
from station.twin.model import (
    CHUNK_EVENTS,
    ModuleSession,
    Preset,
    board_width_ns,
    with_load_effect,
)
from station.twin.module_params import kernel_int, module_rules
from station.twin.processes import CommandResult, LoadProcess, ProcessTable, command_error

MODULE_DIR = "/opt/irq-station/modules"
# module file stem -> (interface, family): the station's own table, so the two never drift
MODULES = {stem: (interface, family) for (family, interface),
           stem in module_names.MODULE_STEMS.items()}
RTAI_BASE_MODULES = ["rtai_fifos", "rtai_sched", "rtai_hal"]
# the RTAI box's own files, which the Raspberry Pi board does not have
PC_ONLY_FILES = frozenset({"/proc/version", "/proc/cmdline", "/proc/interrupts", "/proc/rtai/hal"})
STREAM_LAG_NS = 60_000
KERNEL_RELEASE = "3.4.55-rtai"  # the twin's `uname -r`
MODULE_VERMAGIC = "SMP preempt mod_unload"  # the rest of its modules' vermagic


def module_file(release: str = KERNEL_RELEASE) -> bytes:
    """A twin module file: an ELF magic and the .modinfo vermagic a module built for `release`
    carries (station/target/modules.py reads it as it reads a real .ko)."""
    return f"\x7fELF twin module\0vermagic={release} {MODULE_VERMAGIC}\0".encode("latin-1")
BACKGROUND_AND_WAIT = " & wait $!"  # emit an event once its handler has surely run


class Output(Protocol):
    def write(self, data: bytes) -> None: ...


def _numbered(seq: np.ndarray, mod: LoadedModule) -> np.ndarray:
    """The numbers the module writes: its events' own, from 0 again every restart_every (a
    fault)."""
    every = int(mod.session.params.restart_every)
    return seq % every if every > 0 else seq


def _split_sequence(tokens: list[str]) -> list:
    """[a, b, ';', c] -> [[a, b], ';', [c]]"""
    parts: list = [[]]
    for t in tokens:
        if t in (";", "&&", "||"):
            parts += [t, []]
        else:
            parts[-1].append(t)
    return [p for p in parts if p != []]


@dataclass
class LoadedModule:
    name: str
    interface: str
    family: str
    params: dict[str, str]
    session: ModuleSession
    fmt: str
    bufsize: int
    device: str
    irq: int
    dropped: int = 0
    readers: int = 0
    truth_path: Path | None = None


class EmulatedTarget(ProcessTable):
    def __init__(self, preset: Preset, seed: int, hostname: str = "rtai-twin", board: bool = False,
                 drift_ppm: float = 0.0, slews: tuple[Slew, ...] = (),
                 modules_built_for: str | None = None) -> None:
        """`modules_built_for`: the kernel the module files on it were built for (None: its own;
        another: its insmod refuses them, as a kernel does on a vermagic mismatch)."""
        self.preset = preset
        self.seed = seed
        self.hostname = hostname
        self.modules: dict[str, LoadedModule] = {}
        self.loads: dict[int, LoadProcess] = {}
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {"/", "/tmp", MODULE_DIR, "/proc", "/dev"}
        self._next_pid = 4242
        self._insmod_count = 0
        # its CLOCK_MONOTONIC: "up" for an hour, running off the host's (station/twin/clock.py)
        self.clock = DriftingClock(drift_ppm, slews,
                                   offset_ns=3_600_000_000_000 - time.monotonic_ns())
        self.irq_counts = {7: 0, 31: 0}
        self.truth_path_next: Path | None = None
        # the identity of the next run (campaign seed + run id): its random streams follow it, not
        # the order modules happen to be loaded in, so a resumed campaign equals an uninterrupted
        # one
        self.run_key_next: str | None = None
        # what the next run's load set does to the latency (bench.twin.load_effects), if anything
        self.load_effect_next: dict[str, Any] | None = None
        self.sudo_needs_password = False  # a test's knob: sudo -n refuses as without NOPASSWD
        # every command line received, for tests and by-hand debugging
        self.command_log: list[str] = []
        # what ran through `sudo -n` (the station's privileged calls)
        self.sudo_commands: list[str] = []
        self.truth_dir: Path | None = None
        # the twin scope's timebase, for the truth's rise_scope_ns
        self.scope_clock: DriftingClock | None = None
        # a gpio campaign's twin: a board answering GPIO edges (station/twin/board_target.py)
        self.board = BoardTarget(self.now_ns) if board else None
        self.release = PI_RELEASE if board else KERNEL_RELEASE  # its `uname -r`
        built_for = modules_built_for or self.release
        for stem in MODULES:
            self.files[f"{MODULE_DIR}/{stem}.ko"] = module_file(built_for)
        if self.board is not None:
            self.files[f"{MODULE_DIR}/{RESPONDER_MODULE}.ko"] = module_file(built_for)
            self._cmd_mkdir(["-p", GOVERNOR_DIR])

    # ---- clock and state seen by the scope -------------------------------------------
    def now_ns(self) -> int:
        return self.clock.now_ns()

    def current_session(self) -> ModuleSession | None:
        for mod in self.modules.values():
            return mod.session
        return None

    def edges(self, t0_ns: int, t1_ns: int) -> np.ndarray:
        """Pulses overlapping [t0, t1): what the probe on the loaded module's pin sees."""
        session = self.current_session()
        if session is None:
            return np.empty((0, 2), dtype=np.int64)
        first = max(session.index_at(t0_ns - 1_000_000), 0)
        last = session.index_at(t1_ns) + 1
        if last < first:
            return np.empty((0, 2), dtype=np.int64)
        loaded = self.loads_running()
        parts = []
        for ci in range(first // CHUNK_EVENTS, last // CHUNK_EVENTS + 1):
            c = session.chunk(ci, loaded)
            keep = (c.fall > t0_ns) & (c.rise < t1_ns)
            parts.append(np.stack([c.rise[keep], c.fall[keep]], axis=1))
        return np.concatenate(parts) if parts else np.empty((0, 2), dtype=np.int64)

    # ---- files ------------------------------------------------------------------------
    def _virtual_file(self, path: str) -> bytes | None:
        if self.board is not None and path in (board_files := self.board.files()):
            return board_files[path].encode()
        if path in self.files:
            return self.files[path]
        if self.board is not None and (path in PC_ONLY_FILES or path.startswith("/proc/rtai/")):
            return None  # a Raspberry Pi has no RTAI, parport or DE4 board
        ncpu = os.cpu_count() or 2
        table = {
            "/proc/version": f"Linux version {KERNEL_RELEASE} (twin@{self.hostname}) (gcc 4.9) "
                             "#1 SMP PREEMPT\n",
            "/proc/cmdline": f"BOOT_IMAGE=/vmlinuz-{KERNEL_RELEASE} root=/dev/sda1 ro quiet "
            "isolcpus=1 idle=poll intel_idle.max_cstate=0\n",
            "/proc/rtai/hal": "RTAI 3.9 (rtai_3.9.265.gd99c55e) [twin]\n",
            "/sys/devices/system/cpu/smt/active": "0\n",
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": "performance\n",
            "/proc/loadavg": f"{1.9 if self.loads_running() else 0.05:.2f} 0.80 0.40 1/120 "
                             f"{self._next_pid}\n",
        }
        if path == "/proc/modules":
            names = [*self._module_names(), *self._base_modules()]
            return "".join(f"{m} 20480 0 - Live 0x0000000000000000\n" for m in names).encode()
        if path == "/proc/interrupts":
            cols = "".join(f"       CPU{i}" for i in range(ncpu))
            lines = [cols]
            lines.append("  0:" + "".join(f"{50 + i:>11}" for i in range(ncpu)) + "   IO-APIC   "
                                                                                  "2-edge      "
                                                                                  "timer")
            lines.append(
                "  7:" + f"{self.irq_counts[7]:>11}" + "".join(f"{0:>11}" for _ in range(ncpu - 1))
                + "   IO-APIC   7-edge      parport0"
            )
            lines.append(
                " 31:" + f"{self.irq_counts[31]:>11}" + "".join(f"{0:>11}" for _ in range(ncpu - 1))
                + "   PCI-MSI 524288-edge      de4_echoer"
            )
            return ("\n".join(lines) + "\n").encode()
        parts = path.split("/")
        if (
            len(parts) == 4
            and parts[1] == "proc"
            and parts[2].isdigit()
            and parts[3] in ("cmdline", "environ")
        ):
            self._reap()
            proc = self.loads.get(int(parts[2]))
            if proc is not None and proc.status is None:
                words = proc.argv if parts[3] == "cmdline" else proc.environ
                return "".join(w + "\0" for w in words).encode()
        if path.startswith("/sys/module/") and path.endswith("/parameters/dropped"):
            name = path.split("/")[3]
            if name in self.modules:
                return f"{self.modules[name].dropped}\n".encode()
        return table[path].encode() if path in table else None

    def write_file(self, path: str, data: bytes) -> None:
        if self.board is not None and path == GOVERNOR_FILE:
            self.board.write_governor(data)
            return
        self.files[path] = data
        self._cmd_mkdir(["-p", path.rsplit("/", 1)[0]])

    # ---- commands ---------------------------------------------------------------------
    def run(self, command: str) -> CommandResult | tuple[str, object]:
        """Run a command line: simple commands joined by ;, && or || (as people type
        them by hand). Long-running ones return ("stream", module) or ("load",
        LoadProcess) for the SSH layer to serve, and must stand alone."""
        self.command_log.append(command)
        if command.endswith(BACKGROUND_AND_WAIT):  # the station's wrapper: one job, waited for
            return self._simple(command.removesuffix(BACKGROUND_AND_WAIT))
        try:
            lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError as exc:
            return command_error(f"sh: syntax error: {exc}", 2)
        if not any(t in (";", "&&", "||") for t in tokens):
            return self._simple(command)
        out = CommandResult()
        op = ";"
        for part in _split_sequence(tokens):
            if part in (";", "&&", "||"):
                op = part
                continue
            if (op == "&&" and out.status != 0) or (op == "||" and out.status == 0):
                continue
            result = self._simple(shlex.join(part))
            if not isinstance(result, CommandResult):
                return command_error("sh: the twin runs streams and loads only as a command of "
                                     "their own", 2)
            out = CommandResult(out.stdout + result.stdout, out.stderr + result.stderr,
                                result.status)
        return out

    def _simple(self, command: str) -> CommandResult | tuple[str, object]:
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            return command_error(f"sh: syntax error: {exc}", 2)
        if not argv:
            return CommandResult()
        if argv[:2] == ["sudo", "-n"]:
            if self.sudo_needs_password:  # a sudoers rule without NOPASSWD, as sudo -n reports it
                return command_error("sudo: a password is required", 1)
            self.sudo_commands.append(shlex.join(argv[2:]))
            argv = argv[2:] or ["true"]
        prog, args = argv[0], argv[1:]
        handler = getattr(self, "_cmd_" + prog.replace("-", "_"), None)
        if handler is None:
            return command_error(f"sh: 1: {prog}: not found", 127)
        return handler(args)

    def _cmd_true(self, args: list[str]) -> CommandResult:
        return CommandResult()

    def _cmd_echo(self, args: list[str]) -> CommandResult:
        return CommandResult((" ".join(args) + "\n").encode())

    def _cmd_uname(self, args: list[str]) -> CommandResult:
        if self.board is not None:
            return CommandResult(self.board.uname(self.hostname, args).encode())
        if "-r" in args:
            return CommandResult(f"{KERNEL_RELEASE}\n".encode())
        if "-m" in args:  # this machine's: the station's own programs upload as they are
            return CommandResult(f"{platform.machine()}\n".encode())
        return CommandResult(
            f"Linux {self.hostname} {KERNEL_RELEASE} #1 SMP PREEMPT x86_64 GNU/Linux\n".encode()
        )

    def _cmd_hostname(self, args: list[str]) -> CommandResult:
        return CommandResult(f"{self.hostname}\n".encode())

    def _cmd_nproc(self, args: list[str]) -> CommandResult:
        return CommandResult(
            f"{PI_CPUS if self.board is not None else os.cpu_count() or 2}\n".encode()
        )

    def _cmd_command(self, args: list[str]) -> CommandResult:
        """`command -v NAME`: the board has a compiler (Raspberry Pi OS ships gcc); the RTAI box
        is reached with the station's programs as they are."""
        if len(args) == 2 and args[0] == "-v" and self.board is not None and args[1] in ("cc",
                                                                                         "gcc"):
            return CommandResult(f"/usr/bin/{args[1]}\n".encode())
        return CommandResult(status=1)

    def _cmd_cc(self, args: list[str]) -> CommandResult:
        """The board's compiler, as the station calls it: cc FLAGS -o OUT SRC.c LIBS. The twin
        checks the source is there and makes the program (it runs nothing of it)."""
        if self.board is None:
            return command_error("sh: 1: cc: not found", 127)
        sources = [a for a in args if a.endswith(".c")]
        out = args[args.index("-o") + 1] if "-o" in args[:-1] else "a.out"
        missing = [src for src in sources if src not in self.files]
        if not sources or missing:
            what = missing[0] if missing else "no input files"
            return command_error(f"cc: error: {what}: No such file or directory", 1)
        self.files[out] = (
            b"\x7fELF twin-built " + hashlib.sha256(self.files[sources[0]]).hexdigest().encode()
        )
        return CommandResult()

    def _cmd_cat(self, args: list[str]) -> CommandResult | tuple[str, object]:
        out = b""
        for path in args:
            for mod in self.modules.values():
                if path == mod.device:
                    if len(args) != 1:
                        return command_error("cat: twin streams one device at a time")
                    return ("stream", (mod, None))
            data = self._virtual_file(path)
            if data is None:
                return CommandResult(out, f"cat: {path}: No such file or directory\n".encode(), 1)
            out += data
        return CommandResult(out)

    def _cmd_ls(self, args: list[str]) -> CommandResult:
        paths = [a for a in args if not a.startswith("-")] or ["/"]
        out = []
        for p in paths:
            p = p.rstrip("/") or "/"
            if p in self.files:
                out.append(p)
                continue
            if p not in self.dirs:
                return command_error(f"ls: cannot access '{p}': No such file or directory", 2)
            prefix = p + "/"
            names = {f[len(prefix):].split("/")[0] for f in [*self.files,
                                                             *self.dirs] if f.startswith(prefix)}
            out.extend(sorted(n for n in names if n))
        return CommandResult(("\n".join(out) + "\n").encode() if out else b"")

    def _cmd_mkdir(self, args: list[str]) -> CommandResult:
        for p in (a for a in args if not a.startswith("-")):
            parts = p.rstrip("/").split("/")
            for i in range(2, len(parts) + 1):
                self.dirs.add("/".join(parts[:i]))
        return CommandResult()

    def _cmd_rm(self, args: list[str]) -> CommandResult:
        force = any(a.startswith("-") and "f" in a for a in args)
        for p in (a for a in args if not a.startswith("-")):
            if p in self.files:
                del self.files[p]
            elif not force:
                return command_error(f"rm: cannot remove '{p}': No such file or directory")
        return CommandResult()

    def _base_modules(self) -> tuple[str, ...]:
        return PI_MODULES if self.board is not None else tuple(RTAI_BASE_MODULES)

    def _cmd_lsmod(self, args: list[str]) -> CommandResult:
        rows = ["Module                  Size  Used by"]
        rows += [f"{m:<24}{20480:>6}  0" for m in self._module_names()]
        rows += [f"{m:<24}{65536:>6}  1" for m in self._base_modules()]
        return CommandResult(("\n".join(rows) + "\n").encode())

    def _cmd_insmod(self, args: list[str]) -> CommandResult:
        if not args:
            return command_error("insmod: ERROR: missing filename.", 1)
        path, kv = args[0], args[1:]
        stem = Path(path).name.removesuffix(".ko")
        responder = self.board is not None and stem == RESPONDER_MODULE
        if path not in self.files or not (stem in MODULES or responder):
            return command_error(f"insmod: ERROR: could not load module {path}: No such file or "
                                 "directory")
        if not self.files[path].startswith(b"\x7fELF"):
            return command_error(f"insmod: ERROR: could not insert module {path}: Invalid module "
                                 "format")
        magic = vermagic(self.files[path])
        # a real kernel compares the whole string; the twin its release (a module built for it by
        # a test carries the release alone, and the station checks no more)
        if magic is not None and magic.split()[0] != self.release:
            self.files["/var/log/dmesg-last"] = (f"{stem}: version magic '{magic}' should be "
                                                 f"'{self.release} {MODULE_VERMAGIC}'\n").encode()
            return command_error(f"insmod: ERROR: could not insert module {path}: Invalid module "
                                 "format")
        if responder:
            return self._insmod_responder(path, args[1:])
        if stem in self.modules:
            return command_error(f"insmod: ERROR: could not insert module {path}: File exists")
        interface, family = MODULES[stem]
        rules = module_rules(stem)  # the module's own declarations and checks (target_modules/)
        params: dict[str, str] = {}
        for item in kv:
            key, _, value = item.partition("=")
            if key not in rules.params:
                self.files["/var/log/dmesg-last"] = f"{stem}: Unknown parameter `{key}'\n".encode()
                return command_error(
                    f"insmod: ERROR: could not insert module {path}: Unknown symbol in module, "
                    "or unknown parameter (see dmesg)"
                )
            params[key] = value
        bad = rules.check(params) or self._check_params(params)
        if bad:
            self.files["/var/log/dmesg-last"] = f"{stem}: {bad}\n".encode()
            return command_error(f"insmod: ERROR: could not insert module {path}: Invalid "
                                 "parameters")
        period_us = kernel_int(params.get("period_us", "100"))
        check = params.get("check", "1") in ("1", "Y", "y")
        fmt = params.get("format", "v1")
        self._insmod_count += 1
        truth = self.truth_path_next or (
            self.truth_dir / f"{self._insmod_count:03d}-{stem}.parquet" if self.truth_dir else None
        )
        self.truth_path_next = None
        run_key, self.run_key_next = self.run_key_next or str(self._insmod_count), None
        params_now = self.preset.interfaces[interface]
        effect, self.load_effect_next = self.load_effect_next, None
        if effect is not None:  # the load set this run runs (bench.twin.load_effects)
            params_now = with_load_effect(params_now, **effect)
        session = ModuleSession(
            params_now,
            self.preset.calibration_samples,
            period_us * 1000,
            check,
            self.now_ns(),
            f"{self.seed}/{run_key}/{stem}",
            keep_truth=truth is not None,
            phases=self.preset.load_phases,
            drift_seed=self.seed,
        )
        device = module_names.stream_device(family, interface, kernel_int(params.get("fifo", "0")))
        self.modules[stem] = LoadedModule(
            name=stem,
            interface=interface,
            family=family,
            params=params,
            session=session,
            fmt=fmt,
            # records the module can hold: its ring (mainline) or its RT FIFO's bytes (RTAI)
            bufsize=(kernel_int(params.get("bufsize", "65536")) if family != "rtai" else
                     kernel_int(params.get("fifo_size", str(65536 * records.RECORD_SIZE)))
                     // (records.RECORD_SIZE if fmt == "v1" else 8)),
            device=device,
            irq=kernel_int(params.get("irq", "7")) if interface == "lpt" else 31,
            truth_path=truth,
        )
        self.irq_counts.setdefault(self.modules[stem].irq, 0)
        return CommandResult()

    @staticmethod
    def _check_params(params: dict[str, str]) -> str | None:
        """What the C's own checks do that a range cannot say: the CPU online (this twin's CPUs,
        the kernel's nr_cpu_ids), the format's words, a bool's."""
        cpus = os.cpu_count() or 2
        if "cpu" in params and kernel_int(params["cpu"]) >= cpus:
            return (
                f"cpu={params['cpu']} invalid: accepted -1 (no pinning) or an online CPU in "
                f"0..{cpus - 1}"
            )
        if params.get("format", "v1") not in ("v1", "legacy"):
            return f"format={params['format']!r}: use v1 or legacy"
        if params.get("check", "1") not in ("0", "1", "Y", "N", "y", "n"):
            return f"check={params['check']!r}: use 0 or 1"
        return None

    def _cmd_rmmod(self, args: list[str]) -> CommandResult:
        for name in (a for a in args if not a.startswith("-")):
            name = Path(name).name.removesuffix(".ko")
            if name in RTAI_BASE_MODULES:
                return command_error(f"rmmod: ERROR: Module {name} is in use")
            if (
                self.board is not None
                and name == RESPONDER_MODULE
                and self.board.module is not None
            ):
                self.board.unload_module()
                continue
            mod = self.modules.get(name)
            if mod is None:
                return command_error(f"rmmod: ERROR: Module {name} is not currently loaded")
            if mod.readers:
                return command_error(f"rmmod: ERROR: Module {name} is in use")
            del self.modules[name]
            self._write_truth(mod)
        return CommandResult()

    def _cmd_modinfo(self, args: list[str]) -> CommandResult:
        """`modinfo -F vermagic FILE`, the one form the station uses."""
        if len(args) != 3 or args[:2] != ["-F", "vermagic"]:
            return command_error("modinfo: the twin answers `modinfo -F vermagic FILE` only")
        data = self.files.get(args[2])
        if data is None:
            return command_error(f"modinfo: ERROR: Module {args[2]} not found.")
        magic = vermagic(data)
        return CommandResult(b"" if magic is None else f"{magic}\n".encode())

    def _cmd_dmesg(self, args: list[str]) -> CommandResult:
        return CommandResult(self.files.get("/var/log/dmesg-last", b""))

    # ---- process and stream plumbing -------------------------------------------------
    def _module_names(self) -> list[str]:
        board_module = (
            [RESPONDER_MODULE] if self.board is not None and self.board.module is not None else []
        )
        return [*self.modules, *board_module]

    def _insmod_responder(self, path: str, kv: list[str]) -> CommandResult:
        assert self.board is not None
        if self.board.module is not None:
            return command_error(f"insmod: ERROR: could not insert module {path}: File exists")
        params = dict(item.partition("=")[::2] for item in kv)
        try:
            self.board.load_module(params)
        except BoardError as exc:
            self.files["/var/log/dmesg-last"] = f"{RESPONDER_MODULE}: {exc}\n".encode()
            return command_error(f"insmod: ERROR: could not insert module {path}: Invalid "
                                 "parameters")
        return CommandResult()

    # the station's tool upload: test -x, chmod, mv
    def _cmd_test(self, args: list[str]) -> CommandResult:
        if len(args) == 2 and args[0] in ("-x", "-f", "-e"):
            return CommandResult(status=0 if args[1] in self.files else 1)
        if len(args) == 2 and args[0] == "-d":
            return CommandResult(status=0 if args[1].rstrip("/") in self.dirs else 1)
        return command_error("test: the twin knows -e, -f, -x and -d PATH", 2)

    def _cmd_chmod(self, args: list[str]) -> CommandResult:
        missing = [a for a in args[1:] if a not in self.files]
        if missing:
            return command_error(f"chmod: cannot access '{missing[0]}': No such file or directory")
        return CommandResult()

    def _cmd_mv(self, args: list[str]) -> CommandResult:
        paths = [a for a in args if not a.startswith("-")]
        if len(paths) != 2 or paths[0] not in self.files:
            return command_error(f"mv: cannot stat '{paths[0] if paths else ''}': No such file or "
                                 "directory")
        self.files[paths[1]] = self.files.pop(paths[0])
        return CommandResult()

    def _write_truth(self, mod: LoadedModule) -> None:
        if mod.truth_path is None:
            return
        import pandas as pd

        table = mod.session.truth_table()
        if not table:
            return
        mod.truth_path.parent.mkdir(parents=True, exist_ok=True)
        # each rise where the scope's timebase puts it (drift, slews)
        if self.scope_clock is not None:
            rise = np.asarray(table["rise_ns"], np.float64)
            known = ~np.isnan(rise)
            on_scope = np.full(len(rise), np.nan)
            on_scope[known] = self.scope_clock.from_host(
                self.clock.to_host(rise[known].astype(np.int64))
            )
            table["rise_scope_ns"] = on_scope
        df = pd.DataFrame(table)
        df.attrs = {}
        df.to_parquet(mod.truth_path, index=False)

    def records_between(self, mod: LoadedModule, first: int, last: int) -> bytes:
        """Encode events first..last inclusive as the module would write them, each after the stray
        IRQs whose handlers ran before its own (v1: NOT_OURS records; legacy: dropped, as the
        modules drop them, their sequence numbers unseen)."""
        loaded = self.loads_running()
        out = []
        iface = records.Interface.LPT if mod.interface == "lpt" else records.Interface.PCIE
        for ci in range(first // CHUNK_EVENTS, last // CHUNK_EVENTS + 1):
            c = mod.session.chunk(ci, loaded)
            lo = max(first - c.first, 0)
            hi = min(last - c.first + 1, CHUNK_EVENTS)
            if hi <= lo:
                continue
            sl = slice(lo, hi)
            strays = (c.stray_before >= c.first + lo) & (c.stray_before < c.first + hi)
            self.irq_counts[mod.irq] = self.irq_counts.get(mod.irq,
                                                           0) + (hi - lo) + int(strays.sum())
            if mod.fmt == "legacy":
                out.append(records.encode_legacy(c.sw[sl]))
                continue
            clock = mod.session.params.clock_hz
            flags = records.pack_flags(iface, mod.session.check)
            width: np.ndarray | int = 0
            if clock > 0:
                flags |= records.Flag.HW_WIDTH
                width = board_width_ns(c.rise[sl], c.fall[sl], clock)
            seq = c.seq_of_events(lo, hi)
            if not strays.any():
                out.append(records.encode_v1(_numbered(seq, mod), c.ts[sl], c.sw[sl], flags, width,
                                             mod.dropped))
                continue
            stray_flags = records.pack_flags(iface, mod.session.check, records.Flag.NOT_OURS)
            n, m = hi - lo, int(strays.sum())
            merged_seq = np.concatenate([seq, c.seq_of_strays()[strays]])
            order = np.argsort(merged_seq)
            t_write = np.concatenate([c.ts[sl], c.stray_t_write[strays]])
            latency = np.concatenate([c.sw[sl], c.stray_handler[strays] - c.stray_t_write[strays]])
            all_flags = np.concatenate([np.full(n, int(flags)), np.full(m, int(stray_flags))])
            all_width = np.concatenate([np.broadcast_to(width, n), np.zeros(m, np.int64)])
            out.append(records.encode_v1(_numbered(merged_seq[order], mod), t_write[order],
                                         latency[order],
                                         all_flags[order], all_width[order], mod.dropped))
        return b"".join(out)

    async def serve_stream(self, mod: LoadedModule, out: Output, drain, closed: asyncio.Event,
                           proc: LoadProcess | None = None) -> int:
        """Stream records in real time until the module is unloaded, the reader is
        killed, or its channel goes."""
        next_seq = 0
        mod.readers += 1
        try:
            while not closed.is_set() and (proc is None or proc.status is None):
                if self.modules.get(mod.name) is not mod:
                    if proc is not None:
                        self._end(proc, 0)
                    return 0  # rmmod: the device is gone, the reader sees EOF
                ready = mod.session.index_at(self.now_ns() - STREAM_LAG_NS)
                if ready - next_seq + 1 > mod.bufsize:
                    # the reader fell behind by more than the ring holds: drop what was
                    # overwritten, as the module does, and count it
                    skip = ready - next_seq + 1 - mod.bufsize
                    mod.dropped += skip
                    next_seq += skip
                if ready >= next_seq:
                    out.write(self.records_between(mod, next_seq, ready))
                    next_seq = ready + 1
                    await drain()
                await asyncio.sleep(0.02)
            return proc.status if proc is not None and proc.status is not None else 0
        finally:
            mod.readers -= 1
