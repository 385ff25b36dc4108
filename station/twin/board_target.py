"""The twin's commands as a Raspberry Pi answering GPIO edges (a gpio campaign on the twin).

The emulated target (station/twin/target.py) hands this part what concerns the board: loading
and unloading gpio_responder.ko, starting and stopping the user-space responder, writing the
cpufreq governor; loads it already tracks. Every change is written to the board's log with
the time it happened, so the response line (station/twin/board.py BoardResponse) answers each
stimulus edge as the board was at that moment. Arguments are checked as the real module and
program check them, with their messages.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from station.twin.board import RESPONDERS, BoardLog, Responding

RESPONDER_MODULE = "gpio_responder"
RESPONDER_PROGRAM = "gpio_responder_user"
GOVERNOR_DIR = "/sys/devices/system/cpu/cpufreq/policy0"
GOVERNOR_FILE = f"{GOVERNOR_DIR}/scaling_governor"
AVAILABLE_GOVERNORS = ("conservative", "ondemand", "userspace", "powersave", "performance",
                       "schedutil")
CHIP_LABEL = "pinctrl-bcm2835"
LINES = 54  # a BCM2835's GPIO lines
MODULE_PARAMS = {"chip", "in", "out", "gpio_in", "gpio_out", "edge", "mode", "threaded"}

# What the board says it is: the Pi Zero the response model is (station/twin/board.py: a BCM2835,
# one ARM1176 core at 700-1000 MHz), on Raspberry Pi OS with its stock kernel; WFI idle (no
# idle=poll: the idle exit the model charges is real on it).
PI_RELEASE = "6.1.21+"
PI_VERSION = "#1642 Mon Apr  3 17:19:14 BST 2023"
PI_MACHINE = "armv6l"
PI_CPUS = 1
PI_CMDLINE = ("coherent_pool=1M 8250.nr_uarts=0 snd_bcm2835.enable_headphones=0 "
              "bcm2708_fb.fbwidth=656 bcm2708_fb.fbheight=416 bcm2708_fb.fbswap=1 "
              "vc_mem.mem_base=0x1ec00000 vc_mem.mem_size=0x20000000 console=ttyS0,115200 "
              "console=tty1 root=PARTUUID=4e639091-02 rootfstype=ext4 fsck.repair=yes rootwait")
PI_MODULES = ("brcmfmac", "brcmutil", "cfg80211", "rfkill", "snd_bcm2835", "bcm2835_v4l2",
              "bcm2835_codec",
              "vc_sm_cma", "i2c_bcm2835", "uio_pdrv_genirq")
PI_INTERRUPTS = (  # (irq, controller, hwirq and trigger, name): a BCM2835's; dwc_otg is the USB
    # controller whose 125 µs microframe interrupt the response model charges
    (17, "ARMCTRL-level", "1 Edge", "3f00b880.mailbox"),
    (18, "ARMCTRL-level", "2 Edge", "VCHIQ doorbell"),
    (27, "ARMCTRL-level", "35 Edge", "timer"),
    (56, "ARMCTRL-level", "64 Edge", "dwc_otg, dwc_otg_pcd, dwc_otg_hcd:usb1"),
    (80, "ARMCTRL-level", "88 Edge", "mmc0"),
    (86, "ARMCTRL-level", "94 Edge", "uart-pl011"),
)


class BoardError(ValueError):
    """A responder refused its arguments; the text is what the real one prints."""


@dataclass
class ResponderModule:
    responding: Responding


def _line(value: str, what: str) -> int:
    try:
        n = int(value, 0)
    except ValueError:
        raise BoardError(f"{what}={value!r} is not a number") from None
    if not 0 <= n < LINES:
        raise BoardError(f"{what}={n}: {CHIP_LABEL} has lines 0..{LINES - 1}")
    return n


def module_responding(params: dict[str, str]) -> Responding:
    """What gpio_responder.ko would do with these parameters (BoardError: dmesg's complaint)."""
    unknown = set(params) - MODULE_PARAMS
    if unknown:
        raise BoardError(f"unknown parameter {sorted(unknown)[0]!r} ignored")
    if params.get("chip", CHIP_LABEL) != CHIP_LABEL:
        raise BoardError(f"no GPIO chip labelled {params['chip']!r}")
    lines = (_line(params.get("in", "-1"), "in"), _line(params.get("out", "-1"), "out"))
    if lines[0] == lines[1]:
        raise BoardError("in= and out= name the same line")
    edge = params.get("edge", "both")
    mode = params.get("mode", "echo")
    if edge not in ("rising", "falling", "both") or mode not in ("echo", "toggle"):
        raise BoardError(f"edge={edge!r} mode={mode!r}: edge is rising|falling|both, mode "
                         "echo|toggle")
    threaded = params.get("threaded", "0") in ("1", "Y", "y")
    return Responding("kernel-threaded" if threaded else "kernel", mode, edge)


def program_responding(argv: list[str]) -> Responding:
    """What gpio_responder_user would do with this command line (BoardError: its usage message)."""
    parser = argparse.ArgumentParser(prog=RESPONDER_PROGRAM, add_help=False, exit_on_error=False)
    parser.add_argument("--chip", default="gpiochip0")
    parser.add_argument("--in", dest="line_in", required=True)
    parser.add_argument("--out", dest="line_out", required=True)
    parser.add_argument("--edge", default="both", choices=("rising", "falling", "both"))
    parser.add_argument("--mode", default="echo", choices=("echo", "toggle"))
    parser.add_argument("--priority", type=int, default=0)
    parser.add_argument("--cpu", type=int)
    parser.add_argument("--count", type=int)
    parser.add_argument("--sysfs", action="store_true")
    try:
        args, extra = parser.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit) as exc:
        raise BoardError(f"{RESPONDER_PROGRAM}: {exc}") from None
    if extra:
        raise BoardError(f"{RESPONDER_PROGRAM}: unrecognised option {extra[0]!r}")
    if args.chip not in ("gpiochip0", CHIP_LABEL):
        raise BoardError(f"{RESPONDER_PROGRAM}: cannot open GPIO chip {args.chip!r}")
    lines = (_line(args.line_in, "--in"), _line(args.line_out, "--out"))
    if lines[0] == lines[1]:
        raise BoardError(f"{RESPONDER_PROGRAM}: --in and --out name the same line ({lines[0]})")
    if not 0 <= args.priority <= 99:
        raise BoardError(f"{RESPONDER_PROGRAM}: --priority {args.priority}: expected 1..99")
    return Responding("sysfs" if args.sysfs else "chardev", args.mode, args.edge,
                      fifo=args.priority > 0)


def seed_program_responding(name: str, argv: list[str]) -> Responding:
    """The seed's own Raspberry Pi programs, which the twin plays by name (no real counterpart
    ships)."""
    edge = argv[argv.index("--edge") + 1] if "--edge" in argv[:-1] else "rising"
    return Responding(name, "toggle", edge if edge in ("rising", "falling", "both") else "rising")


class BoardTarget:
    """The board's own state inside the emulated target."""

    def __init__(self, now_ns) -> None:  # noqa: ANN001 - the target's clock
        self.now_ns = now_ns
        self.log = BoardLog(governor="ondemand")
        self.module: ResponderModule | None = None
        self.processes: dict[int, Responding] = {}  # pid -> what that responder does
        self.governor = "ondemand"
        self.loaded = False

    def responding(self) -> Responding | None:
        if self.module is not None:
            return self.module.responding
        return next(iter(self.processes.values()), None)

    def changed(self, loaded: bool | None = None) -> None:
        if loaded is not None:
            self.loaded = loaded
        self.log.record(self.now_ns(), self.responding(), self.governor, self.loaded)

    def load_module(self, params: dict[str, str]) -> None:
        self.module = ResponderModule(module_responding(params))
        self.changed()

    def unload_module(self) -> None:
        self.module = None
        self.changed()

    def start_process(self, pid: int, argv: list[str]) -> None:
        name = argv[0].rsplit("/", 1)[-1]
        if name in ("sysfs-mmap", "python-mmap"):
            self.processes[pid] = seed_program_responding(name, argv[1:])
        else:
            self.processes[pid] = program_responding(argv[1:])
        self.changed()

    def end_process(self, pid: int) -> None:
        if self.processes.pop(pid, None) is not None:
            self.changed()

    def is_responder(self, argv: list[str]) -> bool:
        name = argv[0].rsplit("/", 1)[-1] if argv else ""
        return name.startswith(RESPONDER_PROGRAM) or name in ("sysfs-mmap", "python-mmap")

    def write_governor(self, data: bytes) -> str | None:
        """A write to scaling_governor; the error text if the kernel would refuse it."""
        word = data.decode(errors="replace").strip()
        if word not in AVAILABLE_GOVERNORS:
            return f"write error: Invalid argument ({word!r} is not a governor)"
        self.governor = word
        self.changed()
        return None

    def files(self) -> dict[str, str]:
        """The board's own files as `cat` shows them: its kernel, command line, interrupts,
        modules and cpufreq (the generic twin's RTAI box files never show through)."""
        cols = "".join(f"{f'CPU{i}':>11}" for i in range(PI_CPUS))
        rows = [cols] + [
            f"{irq:>3}:"
            + "".join(f"{(i + 1) * 1000 + irq:>11}" for i in range(PI_CPUS))
            + f"  {ctl:<9} {hw:<12} {name}"
            for irq, ctl, hw, name in PI_INTERRUPTS
        ]
        # (the responder's GPIO line is not listed: the twin does not count its edges)
        return {
            GOVERNOR_FILE: self.governor + "\n",
            "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor": self.governor + "\n",
            f"{GOVERNOR_DIR}/scaling_available_governors": " ".join(AVAILABLE_GOVERNORS) + "\n",
            "/proc/version": f"Linux version {PI_RELEASE} (dom@buildbot) "
                             "(arm-linux-gnueabihf-gcc-8 (Ubuntu/Linaro 8.4.0-3ubuntu1) 8.4.0, "
                             f"GNU ld (GNU Binutils for Ubuntu) 2.34) {PI_VERSION}\n",
            "/proc/cmdline": PI_CMDLINE + "\n",
            "/proc/interrupts": "\n".join(rows) + "\n",
            "/sys/devices/system/cpu/online": (f"0-{PI_CPUS - 1}" if PI_CPUS > 1 else "0") + "\n",
            "/sys/devices/system/cpu/cpuidle/current_driver": "none\n",  # WFI, the default idle
            "/proc/device-tree/model": "Raspberry Pi Zero Rev 1.3\0",
        }

    def uname(self, hostname: str, args: list[str]) -> str:
        if "-r" in args:
            return PI_RELEASE + "\n"
        if "-m" in args:
            return PI_MACHINE + "\n"
        return f"Linux {hostname} {PI_RELEASE} {PI_VERSION} {PI_MACHINE} GNU/Linux\n"

    @staticmethod
    def known_responders() -> tuple[str, ...]:
        return tuple(RESPONDERS)
