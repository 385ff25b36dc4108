"""IEEE 488.2 definite-length blocks read and checked before they are used: the header's digits, the
length against its bound, the bytes that came, the terminator."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from instruments.scope import (
    ScopeDataError,
)

# --- IEEE 488.2 blocks --------------------------------------------------------------------
BLOCK_CHUNK = 1 << 20  # bytes asked of `read` at once (`read_into` is handed all that is due)
MAX_BLOCK_BYTES = 1 << 31  # no dialect's preamble bound comes near: a last guard for direct callers


def read_block(
    read: Callable[[int], bytes],
    command: str,
    datatype: str,
    points: int,
    *,
    big_endian: bool = True,
    termination: bytes = b"\n",
    read_into: Callable[[memoryview], int] | None = None,
    separator: bytes = b"",
) -> np.ndarray:
    """Read `#<n><length><data>` (or `#0<data>`) holding exactly `points` samples of `datatype`;
    `separator` (one byte) may come first: it is skipped (a FastFrame reply may separate its
    frames' blocks with ';', as program message units are; back to back is taken too).

    `read(count)` returns up to `count` bytes of the reply (VISA's read_bytes
    returns them all or times out); fewer means the reply ended. `read_into`,
    if given, reads the data instead: it fills the memoryview it is handed and
    returns how many bytes it wrote (fewer: the reply ended), so the samples
    land in the returned array's memory without a copy. `datatype` is
    a struct/numpy code ("b", "B", "h", "H"). The header is checked before any
    data is read: '#', a digit, that many decimal digits, a byte count that is
    a whole number of samples and equals `points` of them (the preamble's
    count), so a header number alone never decides how much is read or
    allocated. An indefinite block (#0) holds `points` samples. `termination`
    must follow the data. Anything else raises ScopeDataError naming
    `command`, the part at fault and what it held.
    """
    dtype = np.dtype(datatype).newbyteorder(">" if big_endian else "<")
    width = dtype.itemsize
    if not 1 <= points <= MAX_BLOCK_BYTES // width:
        raise ScopeDataError(
            command,
            field="points",
            value=str(points),
            detail=f"a block of 1 to {MAX_BLOCK_BYTES // width} {width}-byte samples was expected",
        )
    expected = points * width
    # one byte at a time: an empty or short reply must not leave us waiting for a second one
    head = _read_exactly(read, 1, command, "block header")
    if separator and head == separator:
        head = _read_exactly(read, 1, command, "block header")
    if head != b"#":
        raise ScopeDataError(
            command,
            field="block header",
            value=_latin1(head),
            detail="an IEEE 488.2 block starts with '#' (are replies sent with headers?)",
        )
    head += _read_exactly(read, 1, command, "block header")
    if not head[1:].isdigit():
        raise ScopeDataError(
            command,
            field="block header",
            value=_latin1(head),
            detail="'#' must be followed by the number of length digits, 0 to 9",
        )
    digits = int(head[1:])
    if digits == 0:  # indefinite length: the data runs to the terminator
        length = expected
    else:
        text = _read_exactly(read, digits, command, "block length")
        if not text.isdigit():  # ASCII digits only: no sign, space, point or exponent
            raise ScopeDataError(
                command,
                field="block length",
                value=_latin1(text),
                detail=f"'#{digits}' must be followed by {digits} decimal digits",
            )
        length = int(text)
        if length % width:
            raise ScopeDataError(
                command,
                field="block length",
                value=str(length),
                detail=f"{length} bytes are not a whole number of {width}-byte samples",
            )
        if length != expected:
            raise ScopeDataError(
                command, field="block length", value=str(length),
                detail=f"the block holds {length // width} samples, the preamble announced {points}"
            )
    data = _read_data(read, read_into, length, command)
    if termination:
        end = _read_exactly(read, len(termination), command, "block end")
        if end != termination:
            raise ScopeDataError(
                command,
                field="block end",
                value=_latin1(end),
                detail=f"the message terminator {_latin1(termination)!r} must follow the {length} "
                "data bytes: the block is longer than its header says",
            )
    samples = data.view(dtype)
    if not dtype.isnative:  # swap where the bytes are rather than into a second array
        samples.byteswap(inplace=True)
    return samples.view(dtype.newbyteorder("="))


def _read_data(
    read: Callable[[int], bytes], read_into: Callable[[memoryview], int] | None, count: int,
    command: str
) -> np.ndarray:
    """The `count` data bytes of a block in one array allocated up front (no joining of chunks)."""
    data = np.empty(count, np.uint8)
    view = memoryview(data)
    got = 0
    while got < count:
        if read_into is not None:
            n = read_into(view[got:])
        else:
            chunk = read(min(count - got, BLOCK_CHUNK))
            n = min(len(chunk), count - got)
            view[got : got + n] = chunk[:n]
        if not n:
            raise ScopeDataError(
                command,
                field="block data",
                detail=f"the reply ended after {got} of {count} bytes",
            )
        got += n
    return data


def _read_exactly(read: Callable[[int], bytes], count: int, command: str, part: str) -> bytes:
    chunks: list[bytes] = []
    got = 0
    while got < count:
        chunk = read(min(count - got, BLOCK_CHUNK))
        if not chunk:
            raise ScopeDataError(
                command,
                field=part,
                detail=f"the reply ended after {got} of {count} bytes",
            )
        chunks.append(chunk[: count - got])
        got += len(chunks[-1])
    return b"".join(chunks)


def _latin1(data: bytes) -> str:
    return data.decode("latin-1")
