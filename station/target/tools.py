"""The station's own programs on a target (target_modules/tools/*.c): built once on this machine
as a static binary and uploaded where the target has the same architecture, or another one this
machine has a cross-compiler for (an arm64 board or guest: gcc-aarch64-linux-gnu), or compiled on
the target with its own cc otherwise (with the libraries the program links, which must be
there)."""

from __future__ import annotations

import hashlib
import os
import platform
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from station.common.atomic_file import replace_atomically
from station.target.ssh import TargetConnection, TargetError

CFLAGS = ("-std=gnu11", "-O2", "-Wall", "-Wextra")
# a target's `uname -m` -> the cross-compiler this machine may have for it (Debian's names)
CROSS_GCC = {"aarch64": "aarch64-linux-gnu-gcc", "x86_64": "x86_64-linux-gnu-gcc"}


@dataclass(frozen=True)
class Tool:
    program: str  # also the name of its source, target_modules/tools/<program>.c
    libs: tuple[str, ...] = ()  # linked as -l<lib>, after the source
    packages: str = "gcc and libc6-dev"  # what building it here needs (Debian)

    def source(self) -> Path:
        # the packaged target_modules/, or the checkout's
        from station.vm.latency_modules import module_sources

        return module_sources() / "tools" / f"{self.program}.c"

    def digest(self) -> str:
        return hashlib.sha256(self.source().read_bytes()).hexdigest()[:16]

    def cache_dir(self) -> Path:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "irq-station" / self.program

    def link_flags(self) -> list[str]:
        return [f"-l{lib}" for lib in self.libs]

    def host_binary(self, machine: str | None = None) -> Path:
        """The static binary for `machine` (`uname -m`; default: this machine's), built on first
        use, with the cross-compiler for another one."""
        machine = machine or platform.machine()
        gcc = "gcc" if machine == platform.machine() else CROSS_GCC.get(machine)
        if gcc is None:
            raise TargetError(f"no cross-compiler known for {machine}")
        out = self.cache_dir() / f"{self.program}-{machine}-{self.digest()}"
        if out.is_file():
            return out
        out.parent.mkdir(parents=True, exist_ok=True)
        replace_atomically(out, lambda tmp: self._build(gcc, tmp))  # two stations may build at once
        return out

    def _build(self, gcc: str, binary: Path) -> None:
        try:
            res = subprocess.run([gcc, *CFLAGS, "-static", "-o", str(binary), str(self.source()),
                                  *self.link_flags()],
                                 capture_output=True, text=True, check=False)
        except FileNotFoundError:
            raise TargetError(f"{gcc} is not installed") from None
        if res.returncode != 0:
            what = self.packages if gcc == "gcc" else f"{gcc} with the libraries it links"
            raise TargetError(f"building {self.program} here with {gcc} failed ({what} needed):\n"
                              f"{res.stderr[-2000:]}")

    def cross_binary(self, machine: str) -> Path | None:
        """The static binary for another machine, if this one has its cross-compiler and the
        build succeeds (libraries it links included); None otherwise."""
        gcc = CROSS_GCC.get(machine)
        if gcc is None or shutil.which(gcc) is None:
            return None
        try:
            return self.host_binary(machine)
        except TargetError:
            return None

    async def ensure(self, conn: TargetConnection, work_dir: str) -> str:
        """The program's path on the target, uploading or building it there if needed."""
        remote = f"{work_dir.rstrip('/')}/bin/{self.program}-{self.digest()}"
        q = shlex.quote(remote)
        if (await conn.run(f"test -x {q}", check=False)).exit_status == 0:
            return remote
        await conn.run(f"mkdir -p {shlex.quote(remote.rsplit('/', 1)[0])}")
        arch = ((await conn.run("uname -m", check=False)).stdout or "").strip()
        binary = self.host_binary() if arch == platform.machine() else self.cross_binary(arch)
        if binary is not None:
            await conn.upload(binary.read_bytes(), remote + ".part")
            await conn.run(f"chmod 755 {q}.part && mv {q}.part {q}")
            return remote
        # another architecture, no cross-compiler here: its own compiler, or nothing
        if (await conn.run("command -v cc", check=False)).exit_status != 0:
            cross = CROSS_GCC.get(arch)
            package = f"gcc-{cross.removesuffix('-gcc').replace('_', '-')}" if cross else ""
            here = (f", or a cross-compiler here (Debian: apt-get install {package})" if cross
                    else "")
            raise TargetError(f"{conn.endpoint.where} is {arch or 'of an unknown architecture'} "
                              f"(this machine: {platform.machine()}) and has no cc to build "
                              f"{self.program}: install gcc there{here}")
        await conn.upload(self.source().read_bytes(), remote + ".c")
        links = " ".join(self.link_flags())
        built = await conn.run(f"cc {' '.join(CFLAGS)} -o {q} {q}.c {links}".rstrip(), check=False)
        await conn.run(f"rm -f {q}.c", check=False)
        if built.exit_status != 0:
            raise TargetError(f"{conn.endpoint.where}: building {self.program} failed: "
                              f"{(built.stderr or '').strip()[-1500:]}")
        return remote
