"""Protocol tests without sockets: a scripted stand-in for a PyVISA message-based resource.

In the spirit of PyMeasure's `expected_protocol`: a test lists, in order, every
(command, reply) exchange a driver must have with the instrument, and the fake
resource under `instruments.scpi.ScpiSession` checks the driver against it:

    with expected_protocol(TektronixTDS, [
        ("*RST;*CLS;HEADer OFF;*ESR?", "0"),
    ]) as scope:
        scope.reset()

A reply is
- a `str`: the answer to a `query()` (given without its termination, as
  PyVISA's query() returns it); a `write()` followed by `read()` gets it too;
- `bytes`: the raw reply to a `write()` read back through `read_bytes()`, as
  on the wire, terminator included (an IEEE 488.2 block: ``b"#15abcde\\n"``);
- `None`: the command is write-only (nothing may be read after it);
- `TIMEOUT`: the instrument hears the command and never answers (the read
  raises PyVISA's timeout, as a real resource does).

The first command that differs from the script, a command after the script's
end, a read with no reply due, a command sent while a reply is still unread,
or any I/O after close() fails the test at once with a `ProtocolError`
(an AssertionError) saying what was expected; leaving the `with` block checks
that every entry was sent and every reply read. A failure the driver swallowed
is raised again there, so it cannot go unnoticed.

`driver(cls, pairs)` builds a driver on a fake session; `FakeClock` stands in
for `instruments.scpi`'s `time` module so busy loops neither sleep nor depend
on the machine's speed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Sequence
from types import TracebackType
from typing import Self, TypeVar

from pyvisa import constants, errors

from instruments.scpi import ScpiInstrument, ScpiSession

RESOURCE = "FAKE::INSTR"


class _Timeout:
    """The reply of an instrument that never answers."""

    def __repr__(self) -> str:
        return "TIMEOUT"


TIMEOUT = _Timeout()
Reply = str | bytes | _Timeout | None
Pair = tuple[str, Reply]
InstrumentT = TypeVar("InstrumentT", bound=ScpiInstrument)


class ProtocolError(AssertionError):
    """The driver's exchange differs from the script."""


def _show(reply: object, limit: int = 60) -> str:
    text = repr(reply)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class FakeResource:
    """A PyVISA message-based resource that plays a script of (command, reply) pairs.

    What the driver did is kept for the test to look at: `sent` (every command
    received, in order), `timeouts` (every value assigned to `timeout`, in ms),
    `clears` (device clears) and `closed`.
    """

    def __init__(
        self,
        pairs: Iterable[Pair],
        *,
        read_termination: str = "\n",
        write_termination: str = "\n",
        timeout: float = 1000.0,
    ) -> None:
        self.script: list[Pair] = list(pairs)
        for i, entry in enumerate(self.script):
            if not (
                isinstance(entry, tuple)
                and len(entry) == 2
                and isinstance(entry[0], str)
                and (entry[1] is None or isinstance(entry[1], str | bytes | _Timeout))
            ):
                raise TypeError(f"script entry {i + 1} must be (command, str | bytes | None | TIMEOUT), got {entry!r}")
        self.read_termination = read_termination
        self.write_termination = write_termination
        self._timeout = timeout
        self.timeouts: list[float] = []
        self.sent: list[str] = []
        self.clears = 0
        self.closed = False
        self.failure: ProtocolError | None = None
        self._pending = bytearray()  # reply bytes not read yet
        self._reply_to: str | None = None  # the command they answer
        self._silent = False  # that command's reply is TIMEOUT

    # --- the PyVISA resource interface the session uses ------------------------------------
    @property
    def timeout(self) -> float:
        return self._timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        self._timeout = value
        self.timeouts.append(value)

    def write(self, message: str) -> int:
        reply = self._next(message, "write")
        self._reply_to = message
        self._silent = isinstance(reply, _Timeout)
        if isinstance(reply, str):
            self._pending += (reply + self.read_termination).encode("latin-1")
        elif isinstance(reply, bytes):
            self._pending += reply
        else:
            self._reply_to = None if reply is None else message
        return len(message) + len(self.write_termination)

    def query(self, message: str, delay: float | None = None) -> str:
        reply = self._next(message, "query")
        if isinstance(reply, _Timeout):
            raise errors.VisaIOError(constants.StatusCode.error_timeout)
        if reply is None:
            self._fail(f"the driver queried {message!r}, which the script says has no reply (a write)")
        if isinstance(reply, bytes):
            self._fail(
                f"the driver queried {message!r} as text; the script gives a binary reply "
                f"({_show(reply)}) to be read with read_bytes()"
            )
        assert isinstance(reply, str)
        return reply

    def read_bytes(self, count: int, chunk_size: int | None = None, break_on_termchar: bool = False) -> bytes:
        self._check_open(f"read_bytes({count})")
        self._reply_due(f"read_bytes({count})")
        if count < 1 or (chunk_size is not None and chunk_size < 1):
            self._fail(f"read_bytes({count}, chunk_size={chunk_size}): counts must be >= 1")
        if count > len(self._pending):
            # VISA waits for the rest, times out and drops what had arrived
            self._consume(len(self._pending))
            raise errors.VisaIOError(constants.StatusCode.error_timeout)
        return self._consume(count)

    def read(self) -> str:
        self._check_open("read()")
        self._reply_due("read()")
        end = self._pending.find(self.read_termination.encode("latin-1")) if self.read_termination else -1
        if end < 0:
            self._consume(len(self._pending))
            raise errors.VisaIOError(constants.StatusCode.error_timeout)
        data = self._consume(end + len(self.read_termination))
        return data[:end].decode("latin-1")

    def clear(self) -> None:
        self._check_open("clear()")
        self.clears += 1
        self._pending.clear()
        self._reply_to = None
        self._silent = False

    def close(self) -> None:
        self.closed = True

    # --- the script --------------------------------------------------------------------------
    @property
    def remaining(self) -> list[Pair]:
        """Script entries not sent yet."""
        return self.script[len(self.sent) :]

    def check(self) -> None:
        """ProtocolError if a failure was swallowed, an entry never sent or a reply left unread."""
        if self.failure is not None:
            raise self.failure
        problems = self._loose_ends()
        if problems:
            raise ProtocolError("; ".join(problems))

    def _loose_ends(self) -> list[str]:
        problems = []
        if self.remaining:
            first = len(self.sent) + 1
            listed = "\n".join(f"    {first + i}. {c!r} -> {_show(r)}" for i, (c, r) in enumerate(self.remaining))
            problems.append(
                f"{len(self.remaining)} of {len(self.script)} script entries were never sent; "
                f"the last command sent was {self._last()}; not sent:\n{listed}"
            )
        if self._pending:
            problems.append(f"{len(self._pending)} bytes of the reply to {self._reply_to!r} were never read")
        return problems

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:
            self.check()
            return
        if isinstance(exc, ProtocolError):
            return
        # something else went wrong: keep it, with the protocol's state beside it
        if self.failure is not None:
            exc.add_note(f"protocol: an earlier failure was swallowed: {self.failure}")
        for problem in self._loose_ends():
            exc.add_note(f"protocol: {problem}")

    # --- internals ---------------------------------------------------------------------------
    def _next(self, command: str, how: str) -> Reply:
        self._check_open(f"{how}({command!r})")
        if self._pending:
            self._fail(
                f"the driver sent {command!r} while {len(self._pending)} bytes of the reply to "
                f"{self._reply_to!r} were unread ({_show(bytes(self._pending))})"
            )
        self._reply_to, self._silent = None, False
        index = len(self.sent)
        self.sent.append(command)
        if index >= len(self.script):
            self._fail(
                f"the driver sent {command!r} ({how}) after the script's end: "
                f"all {len(self.script)} entries were already sent{self._context(index)}"
            )
        expected, reply = self.script[index]
        if command != expected:
            self._fail(
                f"command {index + 1} of {len(self.script)}: the driver sent {command!r} ({how}), "
                f"the script expects {expected!r}{self._context(index)}"
            )
        return reply

    def _reply_due(self, what: str) -> None:
        if self._silent:
            raise errors.VisaIOError(constants.StatusCode.error_timeout)
        if self._reply_to is None or not self._pending:
            self._fail(f"{what} with no reply due: the last command, {self._last()}, has no reply left to read")

    def _consume(self, count: int) -> bytes:
        data = bytes(self._pending[:count])
        del self._pending[:count]
        if not self._pending:
            self._reply_to = None
        return data

    def _check_open(self, what: str) -> None:
        if self.closed:
            self._fail(f"{what} after close()")

    def _last(self) -> str:
        return repr(self.sent[-1]) if self.sent else "(none)"

    def _context(self, index: int, before: int = 3) -> str:
        done = self.script[max(0, index - before) : index]
        if not done:
            return ""
        lines = "\n".join(f"    {index - len(done) + i + 1}. {c!r} -> {_show(r)}" for i, (c, r) in enumerate(done))
        return f"\n  after:\n{lines}"

    def _fail(self, message: str) -> None:
        error = ProtocolError(message)
        if self.failure is None:
            self.failure = error
        raise error


def driver(cls: type[InstrumentT], pairs: Sequence[Pair] | FakeResource) -> InstrumentT:
    """`cls` on a ScpiSession over a FakeResource playing `pairs` (or over the FakeResource given)."""
    fake = pairs if isinstance(pairs, FakeResource) else FakeResource(pairs)
    return cls(ScpiSession(fake, RESOURCE, timeout_s=1.0))


@contextlib.contextmanager
def expected_protocol(cls: type[InstrumentT], pairs: Sequence[Pair]) -> Iterator[InstrumentT]:
    """The driver of `driver(cls, pairs)`; on leaving, every entry must have been sent and read."""
    with FakeResource(pairs) as fake:
        yield driver(cls, fake)


class FakeClock:
    """Stands in for the `time` module of `instruments.scpi`: monotonic() moves only by sleep(),
    which returns at once and is recorded in `sleeps`."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
