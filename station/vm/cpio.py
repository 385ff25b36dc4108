"""A cpio "newc" archive writer: the format the kernel unpacks as initramfs.

Written here rather than with the cpio tool so that every entry is owned by root and device nodes
exist without building as root or calling mknod; mtimes are 0 so the same inputs give the same
bytes.
"""

from __future__ import annotations

import gzip
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath


@dataclass
class Entry:
    mode: int  # file type bits | permissions
    data: bytes = b""
    rdev: tuple[int, int] = (0, 0)


@dataclass
class Tree:
    """Paths (relative, POSIX) to entries; parent directories are added as needed."""

    entries: dict[str, Entry] = field(default_factory=dict)

    def _parents(self, path: str) -> None:
        for parent in reversed(PurePosixPath(path).parents):
            if str(parent) != "." and str(parent) not in self.entries:
                self.entries[str(parent)] = Entry(stat.S_IFDIR | 0o755)

    def dir(self, path: str, perm: int = 0o755) -> None:
        self._parents(path)
        self.entries[path] = Entry(stat.S_IFDIR | perm)

    def file(self, path: str, data: bytes, perm: int = 0o644) -> None:
        self._parents(path)
        self.entries[path] = Entry(stat.S_IFREG | perm, data)

    def copy(self, path: str, source: Path, perm: int | None = None) -> None:
        """source's bytes (symlinks followed) at path, keeping its permissions unless perm is
        given."""
        real = source.resolve()
        self.file(path, real.read_bytes(),
                  perm if perm is not None else stat.S_IMODE(real.stat().st_mode))

    def symlink(self, path: str, target: str) -> None:
        self._parents(path)
        self.entries[path] = Entry(stat.S_IFLNK | 0o777, target.encode())

    def chardev(self, path: str, major: int, minor: int, perm: int = 0o600) -> None:
        self._parents(path)
        self.entries[path] = Entry(stat.S_IFCHR | perm, rdev=(major, minor))

    def newc(self) -> bytes:
        out = bytearray()
        # sorted: a parent is a prefix of its children, so it always comes first
        for ino, name in enumerate(sorted(self.entries), start=1):
            _append(out, name, self.entries[name], ino)
        _append(out, "TRAILER!!!", Entry(0), 0)
        return bytes(out)

    def write(self, out: Path) -> int:
        """The archive uncompressed: QEMU loads it as it is and the kernel need not decompress it,
        which under TCG costs about 0.1 s per MB of the gzip (docs/vm.md)."""
        return _write_atomically(out, self.newc())

    def write_gzip(self, out: Path) -> int:
        return _write_atomically(out, gzip.compress(self.newc(), compresslevel=6, mtime=0))


def _write_atomically(out: Path, blob: bytes) -> int:
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(blob)
    tmp.replace(out)
    return len(blob)


def _pad4(buf: bytearray) -> None:
    buf.extend(b"\0" * (-len(buf) % 4))


def _append(out: bytearray, name: str, e: Entry, ino: int) -> None:
    fields = (
        ino,
        e.mode,
        0,  # uid: root
        0,  # gid: root
        2 if stat.S_ISDIR(e.mode) else 1,
        0,  # mtime
        len(e.data),
        0,
        0,
        e.rdev[0],
        e.rdev[1],
        len(name.encode()) + 1,
        0,  # check (only for the crc format)
    )
    out.extend(b"070701" + b"".join(b"%08X" % f for f in fields))
    out.extend(name.encode() + b"\0")
    _pad4(out)
    out.extend(e.data)
    _pad4(out)
