"""Debian packages of another architecture (arm64 on an amd64 station), from the archive the host
already uses, without touching the host's dpkg (no `dpkg --add-architecture`, nothing installed):
a private apt configuration (its own package lists, cache and an empty status file; the host's
sources, keys and proxy settings) that sees that one architecture, `apt-get download` into a cache
directory, `dpkg-deb -x` to unpack. Works as any user.

An empty status means apt believes nothing is installed, so `closure()` can ask it for every
package a set of packages needs (the guest's libraries): what a fresh arm64 system would
install, without essential packages nobody asked for.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from station.vm.errors import VmError
from station.vm.kernel import check_arch
from station.vm.paths import dir_lock

Log = Callable[[str], None]
LISTS_FRESH_S = 24 * 3600  # package lists younger than this are not fetched again
PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]{0,99}")
VERSION = re.compile(r"[A-Za-z0-9.+~:-]{1,64}")


class ForeignArchive:
    """Debian's archive as an `arch` machine sees it, apt's state kept under `root`."""

    def __init__(self, root: Path, arch: str) -> None:
        self.root = Path(root).resolve()
        self.arch = check_arch(arch)

    @property
    def debs(self) -> Path:
        return self.root / "debs"

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """This archive's state to one user at a time (two test workers, a build beside `station
        vm up`): apt's own lock would fail the second, and two unpacks of one tree would mix.
        Taken by whoever fetches and unpacks (not re-entrant: not inside another's hold)."""
        return dir_lock(self.root)

    def _config(self) -> Path:
        conf = self.root / "apt.conf"
        state = self.root / "state"
        text = "\n".join([
            f'APT::Architecture "{self.arch}";',
            f'APT::Architectures {{ "{self.arch}"; }};',
            f'Dir::State "{state}";',
            f'Dir::State::lists "{state}/lists";',
            f'Dir::State::status "{state}/status";',
            f'Dir::Cache "{self.root}/cache";',
            # downloads land in directories of ours: no sandbox user that could not write them
            'APT::Sandbox::User "root";' if os.geteuid() == 0 else "",
            'Acquire::Languages "none";',
            "",
        ])
        if not conf.is_file() or conf.read_text() != text:
            for d in (state / "lists" / "partial", self.root / "cache" / "archives" / "partial",
                      self.debs):
                d.mkdir(parents=True, exist_ok=True)
            (state / "status").touch()
            conf.write_text(text)
        return conf

    def _apt(self, *cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(os.environ, APT_CONFIG=str(self._config()), DEBIAN_FRONTEND="noninteractive")
        return subprocess.run(list(cmd), capture_output=True, text=True, env=env, cwd=cwd,
                              check=False)

    def update(self, log: Log = print, force: bool = False) -> None:
        """Fetch the architecture's package lists (once a day at most, unless force)."""
        stamp = self.root / "state" / "updated"
        if not force and stamp.is_file() and time.time() - stamp.stat().st_mtime < LISTS_FRESH_S:
            return
        log(f"vm: apt-get update for {self.arch} (private lists in {self.root})")
        res = self._apt("apt-get", "update", "-q")
        # apt-get update exits 0 even when an index could not be fetched: its "E:"/"W:" lines say
        failed = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.startswith("E:")]
        if res.returncode != 0 or failed:
            raise VmError(f"apt-get update of the {self.arch} lists failed:\n"
                          f"{(res.stdout + res.stderr)[-2000:]}")
        stamp.touch()

    def version(self, package: str) -> str | None:
        """The archive's candidate version of package for this architecture, None if it has
        none."""
        _check_package(package)
        res = self._apt("apt-cache", "policy", package)
        m = re.search(r"^\s*Candidate:\s*(\S+)", res.stdout, re.M)
        return m.group(1) if m and m.group(1) != "(none)" else None

    def versions(self, package: str) -> list[str]:
        """Every version of package the lists carry, newest first."""
        _check_package(package)
        res = self._apt("apt-cache", "madison", package)
        return [line.split("|")[1].strip() for line in res.stdout.splitlines() if "|" in line]

    def download(self, package: str, version: str | None = None, log: Log = print) -> Path:
        """The package's .deb (`version`, else the candidate), downloaded once into the cache."""
        _check_package(package)
        version = version or self.version(package)
        if version is None:
            raise VmError(f"Debian's archive has no {package} for {self.arch} (apt-cache policy "
                          f"{package} with {self.root / 'apt.conf'})")
        return self.download_all({package: version}, log)[package]

    def _cached(self, package: str, version: str) -> Path:
        if not VERSION.fullmatch(version):
            raise VmError(f"{version!r} is not a Debian version")
        name = f"{_check_package(package)}_{version.replace(':', '%3a')}_{self.arch}.deb"
        return self.debs / name

    def download_all(self, packages: dict[str, str], log: Log = print) -> dict[str, Path]:
        """package -> its .deb at the version given, the missing ones downloaded in one apt-get
        call."""
        cached = {p: self._cached(p, v) for p, v in packages.items()}
        todo = {p: v for p, v in packages.items() if not cached[p].is_file()}
        if todo:
            scratch = self.debs / "partial"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir(parents=True)
            names = [f"{p}:{self.arch}={v}" for p, v in sorted(todo.items())]
            what = " ".join(names) if len(names) < 4 else f"{len(names)} {self.arch} packages"
            log(f"vm: apt-get download {what}")
            res = self._apt("apt-get", "download", "-q", *names, cwd=scratch)
            for package in todo:
                got = sorted(scratch.glob(f"{package}_*.deb"))
                if res.returncode != 0 or not got:
                    raise VmError(f"apt-get download {package}:{self.arch}={todo[package]} "
                                  f"failed:\n{(res.stdout + res.stderr)[-2000:]}")
                got[-1].replace(cached[package])
            shutil.rmtree(scratch, ignore_errors=True)
        return cached

    def closure(self, packages: Iterable[str]) -> dict[str, str]:
        """package -> version of every package `packages` need on a fresh system of this
        architecture (themselves included), as apt resolves them."""
        wanted = [f"{_check_package(p)}:{self.arch}" for p in packages]
        res = self._apt("apt-get", "install", "--simulate", "-q", "--no-install-recommends",
                        *wanted)
        if res.returncode != 0:
            raise VmError(f"apt cannot resolve {' '.join(wanted)} for {self.arch}:\n"
                          f"{(res.stdout + res.stderr)[-2000:]}")
        found = {}
        for m in re.finditer(r"^Inst (\S+?)(?::\S+)? \((\S+)", res.stdout, re.M):
            found[m.group(1)] = m.group(2)
        return found

    def unpack(self, deb: Path, into: Path) -> None:
        into.mkdir(parents=True, exist_ok=True)
        res = subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], capture_output=True,
                             text=True, check=False)
        if res.returncode != 0:
            raise VmError(f"dpkg-deb -x {deb} failed: {res.stderr.strip()}")


def _check_package(package: str) -> str:
    if not PACKAGE.fullmatch(package):
        raise VmError(f"{package!r} is not a Debian package name")
    return package
