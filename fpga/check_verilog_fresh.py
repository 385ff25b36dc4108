#!/usr/bin/env python3
"""Is the committed verilog/mkIrqEchoer.v generated from the Bluespec sources as they are now?

`make verilog` (bsc) runs this with --write after generating the Verilog: it records, in
verilog/mkIrqEchoer.v.srchash, the sha256 of every src/*.bsv file it compiled (sorted by
path) and of the Verilog it wrote, in `sha256sum` format. Without --write it checks the
record against the tree and exits 1 with what differs: a BSV file changed, added or
removed since the last `make verilog`, or the Verilog edited by hand. No bsc needed, so
CI checks it on every run (tests/test_fpga_cocotb.py, `make -C fpga fresh`).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

FPGA = Path(__file__).resolve().parent
VERILOG = "verilog/mkIrqEchoer.v"
RECORD = VERILOG + ".srchash"


def current(root: Path) -> dict[str, str]:
    """path (relative to fpga/) -> sha256 of its bytes: the BSV sources, then the Verilog."""
    files = sorted(p.relative_to(root).as_posix() for p in (root / "src").glob("*.bsv"))
    files.append(VERILOG)
    return {
        f: hashlib.sha256((root / f).read_bytes()).hexdigest() for f in files if (root / f).exists()
    }


def recorded(root: Path) -> dict[str, str]:
    out = {}
    for line in (root / RECORD).read_text().splitlines():
        digest, _, path = line.partition("  ")
        if line.strip():
            out[path] = digest
    return out


def write(root: Path) -> None:
    hashes = current(root)
    (root / RECORD).write_text("".join(f"{digest}  {path}\n" for path, digest in hashes.items()))


def check(root: Path) -> list[str]:
    """What is stale, one sentence each; empty if the Verilog is current."""
    if not (root / RECORD).exists():
        return [f"{RECORD} is missing: run `make -C fpga verilog` (needs bsc) and commit it"]
    now, then = current(root), recorded(root)
    problems = []
    for path in sorted(set(now) | set(then)):
        if path == VERILOG:
            continue
        if path not in then:
            problems.append(f"{path} is new since {VERILOG} was generated")
        elif path not in now:
            problems.append(f"{path} was removed since {VERILOG} was generated")
        elif now[path] != then[path]:
            problems.append(f"{path} changed since {VERILOG} was generated")
    if problems:
        problems.append(f"{VERILOG} is stale: regenerate it with `make -C fpga verilog` (needs "
                        f"bsc) and commit it with {RECORD}")
    elif now.get(VERILOG) != then.get(VERILOG):
        problems.append(f"{VERILOG} differs from what `make verilog` wrote (edited by hand?): "
                        "regenerate it with `make -C fpga verilog` (needs bsc) and commit it with "
                        f"{RECORD}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help="record the hashes (what `make verilog` does)")
    ap.add_argument("--root", type=Path, default=FPGA,
                    help="the fpga/ directory (default: this script's)")
    args = ap.parse_args(argv)
    if args.write:
        write(args.root)
        print(f"recorded {RECORD}")
        return 0
    problems = check(args.root)
    for p in problems:
        print(f"STALE: {p}", file=sys.stderr)
    if not problems:
        print(f"{VERILOG} is current with src/*.bsv ({RECORD})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
