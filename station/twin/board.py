"""The twin as a Raspberry Pi answering GPIO edges (seed 002): what delays the answer, and by how
much.

A response delay is built from the mechanisms the seed found, each a term of its own so the
twin's truth says why one case is slower than another:

- the responder's own path (`RESPONDERS`): the interrupt entry and wake-up of whatever waits
  for the edge, then the output write. A sysfs write is a system call and a context switch
  into the kernel's GPIO driver; an mmap'd register store is one bus write; the seed's Python
  program adds its interpreter. These are CPU work, so they stretch as the clock slows;
- the CPU clock: a Pi Zero runs 700-1000 MHz. ondemand (Raspbian's default) keeps an idle
  CPU at 700 MHz and raises it under load; performance holds 1000 MHz; powersave 700 MHz;
- leaving the idle loop (WFI) when the CPU was idle;
- a competing task when the CPU is loaded: a responder task (user space, or the kernel's IRQ
  thread) waits for the scheduler to preempt it, long under SCHED_OTHER, short under
  SCHED_FIFO. A hard interrupt handler does not wait for tasks;
- periodic interrupts: an edge arriving while one's handler runs waits for the rest of it. The
  Pi's USB controller (dwc_otg) interrupts at every 125 µs microframe, the kernel's timer tick
  every 10 ms (HZ=100 on Raspbian). These are the outliers; their arrivals are multiples of
  the period of the interrupt they collided with.

Numbers are in µs at the full clock. They are chosen to reproduce the seed's findings
(sysfs more than twice as slow as the mmap'd C program, Python in between; ondemand making
an idle Pi slower than a loaded one, performance the other way round) from these mechanisms,
not copied from measurements; the seed publishes no table of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

F_MAX_MHZ = 1000.0
F_MIN_MHZ = 700.0
IDLE_EXIT_US = 3.0  # WFI wake-up
# (name, period in ns, handler length in µs at the full clock)
PERIODIC_IRQS = (("dwc_otg SOF", 125_000, 2.5), ("timer tick", 10_000_000, 12.0))
LOAD_SLOWDOWN = 1.10  # caches and memory bus shared with the load
# mean wait for a SCHED_OTHER task to be preempted by the woken responder
CONTENTION_OTHER_US = 25.0
CONTENTION_FIFO_US = 1.5  # a SCHED_FIFO (or IRQ-thread) responder preempts at once
SPREAD = 0.06  # lognormal sigma of every term: caches, bus arbitration, branch history

# governors that follow the load (their idle clock is the lowest, their loaded clock the highest)
FOLLOWING = ("ondemand", "schedutil", "conservative")


@dataclass(frozen=True)
class ResponderPath:
    """What one responder does between the edge and the output, in µs at the full clock."""

    wake_us: float  # interrupt entry up to the code that answers running
    answer_us: float  # setting the output
    task: bool  # a task (waits for the scheduler under load); False: a hard IRQ handler
    what: str


RESPONDERS: dict[str, ResponderPath] = {
    "kernel": ResponderPath(2.0, 0.4, False,
                            "gpio_responder.ko sets the output in the hard interrupt handler"),
    "kernel-threaded": ResponderPath(7.0, 0.4, True,
                                     "gpio_responder.ko threaded: the IRQ thread is woken first"),
    "chardev": ResponderPath(30.0, 6.0, True,
                             "a task woken from the GPIO character device, an ioctl to set"),
    "sysfs": ResponderPath(40.0, 60.0, True,
                           "poll() on sysfs value wakes the task; the write is open/write/close "
                           "of another sysfs file, system calls through the GPIO driver"),
    "sysfs-mmap": ResponderPath(40.0, 0.3, True,
                                "poll() on sysfs wakes the task; the output is one store to the "
                                "mmap'd GPIO register (the seed's C program with RPi.GPIO's "
                                "register code)"),
    "python-mmap": ResponderPath(40.0, 36.0, True,
                                 "RPi.GPIO from Python: the same wake-up, then the interpreter "
                                 "runs the callback before its register store"),
}


@dataclass(frozen=True)
class BoardState:
    """What the twin board is doing when an edge arrives."""

    responder: str | None  # a key of RESPONDERS, None: nothing answers
    governor: str = "ondemand"
    loaded: bool = False
    fifo: bool = False  # the user-space responder runs SCHED_FIFO

    def clock_mhz(self) -> float:
        if self.governor == "performance":
            return F_MAX_MHZ
        if self.governor in FOLLOWING:
            return F_MAX_MHZ if self.loaded else F_MIN_MHZ
        return F_MIN_MHZ  # powersave; userspace is left at its lowest setting


def _uniforms(lead_ns: np.ndarray, salt: int, count: int) -> np.ndarray:
    """`count` uniform (0, 1) draws per edge, fixed by its time: the past never changes."""
    from instruments.sim.source import unit_hash

    return np.stack([np.clip(unit_hash(lead_ns, salt * 1000 + i), 1e-12,
                             1 - 1e-12) for i in range(count)])


def response_delays_ns(lead_ns: np.ndarray, state: BoardState, seed: int = 0) -> tuple[np.ndarray,
                                                                                       np.ndarray]:
    """(delay, collision wait) in ns of the answer to edges at `lead_ns` in `state` (NaN: no
    answer).

    The collision wait is the part spent behind a periodic interrupt's handler (0 for most edges).
    """
    lead = np.asarray(lead_ns, dtype=np.int64)
    if state.responder is None:
        nan = np.full(len(lead), np.nan)
        return nan, nan
    path = RESPONDERS[state.responder]
    u = _uniforms(lead, seed, 4)
    from scipy.special import ndtri

    def spread(k: int) -> np.ndarray:
        return np.exp(SPREAD * ndtri(u[k]))

    stretch = F_MAX_MHZ / state.clock_mhz() * (LOAD_SLOWDOWN if state.loaded else 1.0)
    delay_us = (path.wake_us * spread(0) + path.answer_us * spread(1)) * stretch
    if not state.loaded:
        delay_us = delay_us + IDLE_EXIT_US * spread(2)
    elif path.task:
        mean = (
            CONTENTION_FIFO_US
            if (state.fifo or state.responder == "kernel-threaded")
            else CONTENTION_OTHER_US
        )
        delay_us = delay_us - mean * np.log(u[3])  # exponential: how long the running task has left
    wait_us = collisions(lead, state).wait_ns / 1000.0
    return (delay_us + wait_us) * 1000.0, wait_us * 1000.0


@dataclass(frozen=True)
class Collisions:
    """Per edge, the periodic handler it waited behind (irq -1, NaN times: none)."""

    wait_ns: np.ndarray  # how long it waited for the rest of that handler
    irq: np.ndarray  # index into PERIODIC_IRQS
    handler_start_ns: np.ndarray  # when that handler began (the twin's clock)
    handler_ns: np.ndarray  # how long that handler ran at the state's clock


def collisions(lead_ns: np.ndarray, state: BoardState) -> Collisions:
    """An edge during a periodic handler waits for the rest of it (periods are fixed on the
    board's clock: the twin's, from its boot); the longest wait counts."""
    lead = np.asarray(lead_ns, dtype=np.int64)
    wait = np.zeros(len(lead))
    irq = np.full(len(lead), -1)
    start = np.full(len(lead), np.nan)
    length = np.full(len(lead), np.nan)
    for k, (_, period_ns, handler_us) in enumerate(PERIODIC_IRQS):
        length_ns = handler_us * 1000.0 * F_MAX_MHZ / state.clock_mhz()
        into = (lead % period_ns).astype(np.float64)
        mine = (into < length_ns) & (length_ns - into > wait)
        wait = np.where(mine, length_ns - into, wait)
        irq = np.where(mine, k, irq)
        start = np.where(mine, (lead - lead % period_ns).astype(np.float64), start)
        length = np.where(mine, length_ns, length)
    return Collisions(wait, irq, start, length)


def describe() -> dict[str, object]:
    """The model's constants, for the report's account of the twin."""
    return {
        "clock_mhz": {"max": F_MAX_MHZ, "min": F_MIN_MHZ},
        "idle_exit_us": IDLE_EXIT_US,
        "periodic_irqs": [{"name": n, "period_us": p / 1000, "handler_us": h} for n, p,
                          h in PERIODIC_IRQS],
        "load_slowdown": LOAD_SLOWDOWN,
        "contention_us": {"sched_other": CONTENTION_OTHER_US, "sched_fifo": CONTENTION_FIFO_US},
        "responders": {name: asdict(path) for name, path in RESPONDERS.items()},
    }


LONGEST_ANSWER_NS = 5_000_000  # no modelled answer comes later than this after its edge


@dataclass(frozen=True)
class Responding:
    """A responder running on the twin board: which, answering which edges, how."""

    responder: str  # a key of RESPONDERS
    mode: str = "echo"  # echo | toggle
    edge: str = "both"  # rising | falling | both
    fifo: bool = False


class BoardLog:
    """The board's state over time (the twin's clock), appended as commands change it."""

    def __init__(self, governor: str = "ondemand") -> None:
        self.times: list[int] = [0]
        self.states: list[tuple[Responding | None, str, bool]] = [(None, governor, False)]

    def record(self, now_ns: int, responding: Responding | None, governor: str,
               loaded: bool) -> None:
        state = (responding, governor, loaded)
        if state != self.states[-1]:
            self.times.append(now_ns)
            self.states.append(state)

    def at(self, t_ns: np.ndarray) -> np.ndarray:
        """Index into `states` of the state at each time."""
        return np.searchsorted(np.asarray(self.times), t_ns, side="right") - 1

    def responder_since(self, t_ns: int) -> int:
        """When the responder running at `t_ns` started (for a toggle output's level)."""
        i = int(self.at(np.array([t_ns]))[0])
        while i > 0 and self.states[i - 1][0] == self.states[i][0]:
            i -= 1
        return self.times[i]


class BoardResponse:
    """The output line of the twin board: its answers to the stimulus (an EdgeSource)."""

    # an EdgeSource
    def __init__(self, stimulus, log: BoardLog, seed: int = 0) -> None:  # noqa: ANN001
        self.stimulus = stimulus
        self.log = log
        self.seed = seed

    def now_ns(self) -> int:
        return self.stimulus.now_ns()

    def _responding(self, edge_ns: np.ndarray) -> Iterator[tuple[np.ndarray, Any, BoardState]]:
        """For each board state the edges fall in while a responder answers: which edges (a mask),
        the responder, and the board's state."""
        index = self.log.at(edge_ns)
        for i in np.unique(index):
            responding, governor, loaded = self.log.states[i]
            if responding is not None:
                yield index == i, responding, BoardState(responding.responder, governor, loaded,
                                                         responding.fifo)

    def answers(self, edge_ns: np.ndarray, rising: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(answer time, collision wait) of each stimulus edge, NaN where nothing answers it."""
        answer = np.full(len(edge_ns), np.nan)
        wait = np.full(len(edge_ns), np.nan)
        for mine, responding, state in self._responding(edge_ns):
            if responding.edge != "both":
                mine &= rising if responding.edge == "rising" else ~rising
            delay, collided = response_delays_ns(edge_ns[mine], state, self.seed)
            answer[mine] = edge_ns[mine] + delay
            wait[mine] = collided
        return answer, wait

    def truth(self, t0_ns: int, t1_ns: int) -> dict[str, np.ndarray]:
        """What the board did with each stimulus edge in [t0_ns, t1_ns) (the twin's clock): its
        time, direction, answer (NaN: none), the periodic handler it waited behind, and the board's
        state then."""
        pulses = np.asarray(self.stimulus.edges(t0_ns, t1_ns), dtype=np.int64).reshape(-1, 2)
        times = pulses.reshape(-1)
        rising = np.tile([True, False], len(pulses))
        keep = (times >= t0_ns) & (times < t1_ns)
        times, rising = times[keep], rising[keep]
        answer, wait = self.answers(times, rising)
        index = self.log.at(times)
        irq = np.full(len(times), -1)
        start = np.full(len(times), np.nan)
        length = np.full(len(times), np.nan)
        states = [self.log.states[i] for i in index]
        for mine, _, state in self._responding(times):
            c = collisions(times[mine], state)
            irq[mine], start[mine], length[mine] = c.irq, c.handler_start_ns, c.handler_ns
        return {"edge_ns": times, "rising": rising, "answer_ns": answer, "wait_ns": wait,
                "irq": irq,
                "irq_name": np.array([PERIODIC_IRQS[k][0] if k >= 0 else "" for k in irq],
                                     dtype=object),
                "handler_start_ns": start, "handler_ns": length,
                "responder": np.array([r.responder if r else "" for r, _, _ in states],
                                      dtype=object),
                "governor": np.array([g for _, g, _ in states], dtype=object),
                "loaded": np.array([ld for _, _, ld in states], dtype=bool)}

    def edges(self, t0_ns: int, t1_ns: int) -> np.ndarray:
        start = self.log.responder_since(max(t0_ns - LONGEST_ANSWER_NS, 0))
        responding = self.log.states[int(self.log.at(np.array([max(t0_ns, 0)]))[0])][0]
        toggle = responding is not None and responding.mode == "toggle"
        since = start if toggle else t0_ns - LONGEST_ANSWER_NS
        pulses = np.asarray(self.stimulus.edges(since, t1_ns), dtype=np.int64).reshape(-1, 2)
        times = pulses.reshape(-1)  # lead, trail, lead, trail...
        rising = np.tile([True, False], len(pulses))
        answer, _ = self.answers(times, rising)
        if toggle:  # the output flips at each answer, from low when the responder started
            flips = np.sort(answer[~np.isnan(answer)])
            if len(flips) % 2:  # high now, until an answer still to come
                flips = np.append(flips, max(float(t1_ns), flips[-1]) + LONGEST_ANSWER_NS)
            out = np.rint(flips).astype(np.int64).reshape(-1, 2)
        else:  # echo: high from the answer to a rising edge to the answer to the falling one
            pairs = answer.reshape(-1, 2)
            whole = ~np.isnan(pairs).any(axis=1)
            out = np.rint(pairs[whole]).astype(np.int64)
            out[:, 1] = np.maximum(out[:, 1], out[:, 0] + 1)
        keep = (out[:, 1] > t0_ns) & (out[:, 0] < t1_ns)
        return out[keep]
