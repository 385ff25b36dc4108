"""Files written whole or not at all: a reader that polls for a file (a test waiting for the
twin's twin.json, a dashboard reading campaign.json) never sees it empty or half written, and a
failed write leaves the previous file as it was."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path


def replace_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """`write` fills a temporary file beside `path`, which then replaces `path` in one rename
    (atomic on one file system); on any failure the temporary file is removed and the error
    raised, `path` untouched."""
    # its own temporary name: two writers of one path (two processes, two threads) never write
    # into each other's; the last rename wins whole
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_text_atomically(path: Path, text: str) -> None:
    replace_atomically(path, lambda tmp: tmp.write_text(text))
