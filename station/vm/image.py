"""The VM image: kernel, initramfs, modules and keys in one cache directory, rebuilt only when an
input changes."""

from __future__ import annotations

import datetime as dt
import gzip
import hashlib
import json
import lzma
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from station.vm import cpio, cross, guest_root, initramfs, keys, latency_modules
from station.vm import kernel as kernel_mod
from station.vm.errors import VmError
from station.vm.foreign import ForeignArchive
from station.vm.hostdeps import ensure_host_packages
from station.vm.paths import dir_lock, foreign_dir, image_dir

IMAGE_RECORD = "manifest.json"  # what the cached image was built from (not a run's manifest)
NIC_DRIVER = "e1000"  # matches `-device e1000` in machine.py
Log = Callable[[str], None]


@dataclass(frozen=True)
class VmImage:
    dir: Path

    @classmethod
    def open(cls, vm_dir: Path | None = None, kernel: str = "regular",
             arch: str = "amd64") -> VmImage:
        """A complete image of that kernel flavour and architecture already built under vm_dir
        (as build_image puts it; no checks that its inputs are current)."""
        kernel_mod.check_flavour(kernel)
        kernel_mod.check_arch(arch)
        image = cls(image_dir(vm_dir, kernel, arch))
        manifest = image.read_manifest()
        if not manifest.get("complete"):
            raise VmError(
                f"no complete VM image in {image.dir}: build it first "
                f"(build_image(kernel={kernel!r}, arch={arch!r}) / station vm up)"
            )
        if image.flavour != kernel:
            raise VmError(f"{image.dir} holds a {image.flavour!r} image, not {kernel!r}")
        return image

    def read_manifest(self) -> dict[str, Any]:
        try:
            return json.loads((self.dir / IMAGE_RECORD).read_text())
        except (OSError, ValueError):
            return {}

    @property
    def kernel_path(self) -> Path:
        """The uncompressed ELF vmlinux (PVH boot), or the bzImage if extraction failed; an arm64
        guest's uncompressed Image."""
        return self.dir / "kernel" / self.read_manifest().get("kernel_file", "vmlinux")

    @property
    def initrd_path(self) -> Path:
        return self.dir / "initrd.cpio"  # uncompressed: faster boots under TCG (cpio.Tree.write)

    @property
    def kernel_release(self) -> str:
        """uname -r in the guest: "6.1.0-56-amd64", "6.1.0-56-rt-amd64"."""
        return self.read_manifest()["kernel_release"]

    @property
    def flavour(self) -> str:
        """The kernel flavour: "regular" (Debian's generic kernel) or "rt" (Debian's PREEMPT_RT
        build)."""
        # images built before flavours: regular
        return self.read_manifest().get("kernel_flavour", "regular")

    @property
    def arch(self) -> str:
        """Debian's name of the guest's architecture: "amd64" or "arm64"."""
        return self.read_manifest().get("arch", "amd64")  # images before arm64: amd64

    @property
    def preempt_rt(self) -> bool:
        return self.flavour == "rt"

    @property
    def modules_dir(self) -> Path:
        return self.dir / "modules"

    @property
    def identity_file(self) -> Path:
        return self.dir / "id_ed25519"

    @property
    def host_key_file(self) -> Path:
        return self.dir / "dropbear_ed25519_host_key"

    @property
    def host_key_pub(self) -> str:
        return (self.dir / "host_key.pub").read_text().strip()


def _digest(*parts: str | bytes) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()


def _recipe(*modules: object) -> bytes:
    """The source of the code that makes a part: changing how it is built rebuilds it."""
    return b"".join(Path(m.__file__).read_bytes() for m in modules)  # type: ignore[attr-defined]


def _write_manifest(vm_dir: Path, manifest: dict[str, Any]) -> None:
    tmp = vm_dir / (IMAGE_RECORD + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    tmp.replace(vm_dir / IMAGE_RECORD)


def _nic_load_order(image: kernel_mod.LinuxImage, driver: str) -> list[Path]:
    """driver's .ko and its dependencies from modules.dep, dependencies first."""
    deps: dict[str, list[str]] = {}
    for line in (image.modules_root / "modules.dep").read_text().splitlines():
        mod, _, rest = line.partition(":")
        deps[mod] = rest.split()
    target = next((m for m in deps if Path(m).name in (f"{driver}.ko", f"{driver}.ko.xz")), None)
    if target is None:
        raise VmError(f"linux-image-{image.release} has no {driver}.ko")
    # modules.dep lists each module's dependencies so that the last must be loaded first
    return [image.modules_root / m for m in [*reversed(deps[target]), target]]


def _build_kernel(vm_dir: Path, deb: Path, release: str, version: str, log: Log) -> dict[str, Any]:
    staging = vm_dir / "staging"
    out = vm_dir / "kernel"
    log(f"vm: unpacking {deb.name}")
    img = kernel_mod.unpack(deb, release, version, staging)
    if out.exists():
        shutil.rmtree(out)
    (out / "nic").mkdir(parents=True)
    if kernel_mod.release_arch(release) == "arm64":
        # QEMU loads an arm64 Image as it is; a gzipped one it would unpack at every boot
        data = img.bzimage.read_bytes()
        compression = "gzip" if data[:2] == b"\x1f\x8b" else None
        (out / "Image").write_bytes(gzip.decompress(data) if compression else data)
        kernel_file = "Image"
    else:
        try:
            compression = kernel_mod.extract_vmlinux(img.bzimage, out / "vmlinux")
            kernel_file = "vmlinux"
            log(f"vm: extracted the uncompressed vmlinux ({compression}) for direct PVH boot")
        except VmError as exc:
            shutil.copy2(img.bzimage, out / "bzImage")
            kernel_file, compression = "bzImage", None
            log(f"vm: could not extract vmlinux ({exc}); booting the bzImage (slower: "
                "decompresses in the guest)")
    nic = []
    for ko in _nic_load_order(img, NIC_DRIVER):
        dest = out / "nic" / ko.name
        if ko.suffix == ".xz":  # busybox insmod takes plain .ko only
            dest = dest.with_suffix("")
            dest.write_bytes(lzma.decompress(ko.read_bytes()))
        else:
            shutil.copy2(ko, dest)
        nic.append(dest.name)
    shutil.rmtree(staging)
    return {"kernel_file": kernel_file, "kernel_compression": compression, "nic_modules": nic}


def _guest_kernel(vm_dir: Path, kernel: str, arch: str, root: Path | None,
                  log: Log) -> tuple[str, str, Path]:
    """(release, version, deb) of the guest's linux-image: the installed headers' own for amd64,
    the same Debian version of arch's kernel otherwise."""
    if arch == "amd64":
        return kernel_mod.download_linux_image(vm_dir / "debs", log, flavour=kernel)
    host, version = cross.host_release()
    release = kernel_mod.flavour_release(host, kernel, arch)
    archive = ForeignArchive(foreign_dir(arch, root), arch)
    return release, version, guest_root.download_linux_image(archive, release, version, log)


def build_image(
    vm_dir: Path | None = None, force: bool = False, log: Log = print, *, kernel: str = "regular",
    arch: str = "amd64"
) -> VmImage:
    """Build (or reuse) the image of a kernel flavour: Debian's kernel matching the installed
    headers ("regular"), or Debian's PREEMPT_RT build of the same version ("rt"), our modules built
    for it, and an initramfs with busybox, dropbear, the NIC driver and the load/probe tools
    (cyclictest, hackbench, stressapptest, stress-ng). vm_dir is the cache root: the regular image
    lives in it, the rt image in <vm_dir>/rt, so both coexist. arch "arm64": Debian's arm64 kernel
    of the same version and flavour, the modules cross-built, the guest's programs from arm64
    packages, in <vm_dir>/arm64 (and /rt). Idempotent: a part is rebuilt only when its inputs
    changed (or force)."""
    kernel_mod.check_flavour(kernel)
    kernel_mod.check_arch(arch)
    root = vm_dir
    vm_dir = image_dir(vm_dir, kernel, arch).resolve()
    vm_dir.mkdir(parents=True, exist_ok=True)
    ensure_host_packages(log, kernel=kernel, arch=arch)
    image = VmImage(vm_dir)
    with dir_lock(vm_dir):
        old = image.read_manifest()
        if old and (old.get("kernel_flavour", "regular"), old.get("arch", "amd64")) != (kernel,
                                                                                        arch):
            raise VmError(
                f"{vm_dir} holds the {old.get('kernel_flavour', 'regular')!r} "
                f"{old.get('arch', 'amd64')} image, not {kernel!r} {arch}: pass the cache root as "
                "vm_dir (the rt image lives in <vm_dir>/rt, arm64's in <vm_dir>/arm64)"
            )
        old = {} if force else old
        inputs = dict(old.get("inputs", {}))
        manifest = {**old, "complete": False, "kernel_flavour": kernel, "arch": arch}

        client_pub = keys.ensure_client_key(image.identity_file)
        host_pub = keys.ensure_host_key(image.host_key_file)
        pub = vm_dir / "host_key.pub"
        if not pub.is_file() or pub.read_text() != host_pub + "\n":
            # atomically: a VM starting in another process reads it for its known_hosts
            (vm_dir / "host_key.pub.tmp").write_text(host_pub + "\n")
            (vm_dir / "host_key.pub.tmp").replace(pub)

        release, version, deb = _guest_kernel(vm_dir, kernel, arch, root, log)
        key = _digest(release, version, _recipe(kernel_mod), NIC_DRIVER)
        kernel_ok = (vm_dir / "kernel" / old.get("kernel_file", "vmlinux")).is_file()
        if inputs.get("kernel") != key or not kernel_ok:
            _write_manifest(vm_dir, manifest)
            manifest.update(_build_kernel(vm_dir, deb, release, version, log))
            inputs["kernel"] = key
        for stale in (vm_dir / "debs").glob("*.deb"):
            if stale != deb:
                stale.unlink()

        # amd64: the rt headers are installed here; arm64's are fetched and unpacked
        kdir = cross.guest_headers(arch, kernel, root, log)[1]
        make_args = cross.make_args(arch)
        src = latency_modules.module_sources()  # the installed package's copy, or the checkout's
        src_hash = latency_modules.sources_hash(src)
        key = _digest(src_hash, release, version, _recipe(latency_modules), *make_args)
        modules_ok = all((image.modules_dir / m).is_file() for m in latency_modules.MODULES)
        if inputs.get("modules") != key or not modules_ok:
            log(
                f"vm: building {', '.join(latency_modules.MODULES)} from {src} against {kdir} (W=1)"
            )
            _write_manifest(vm_dir, manifest)
            latency_modules.build(kdir, vm_dir / "build", image.modules_dir, src, make_args)
            inputs["modules"] = key

        if arch == "amd64":
            guest_files = Path("/")
            packages = {p: kernel_mod.package_version(p) for p in initramfs.HOST_SOURCES}
        else:
            guest_files, packages = guest_root.guest_sysroot(
                ForeignArchive(foreign_dir(arch, root), arch), initramfs.guest_tools(arch),
                foreign_dir(arch, root) / "guest", log)
        key = _digest(
            _recipe(initramfs, cpio),
            json.dumps(packages, sort_keys=True),
            inputs["kernel"],
            inputs["modules"],
            client_pub,
            host_pub,
        )
        if inputs.get("initramfs") != key or not image.initrd_path.is_file():
            log("vm: assembling the initramfs")
            _write_manifest(vm_dir, manifest)
            size = initramfs.build(
                image.initrd_path,
                release=release,
                nic_modules=[vm_dir / "kernel" / "nic" / n for n in manifest["nic_modules"]],
                latency_modules=[image.modules_dir / m for m in latency_modules.MODULES],
                host_key=image.host_key_file,
                authorized_key=client_pub,
                root=guest_files,
                arch=arch,
            )
            manifest["initrd_bytes"] = size
            (vm_dir / "initrd.gz").unlink(missing_ok=True)  # what images before initrd.cpio booted
            inputs["initramfs"] = key
            manifest["built_at"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")

        manifest.update(
            complete=True,
            schema=1,
            kernel_release=release,
            kernel_flavour=kernel,
            arch=arch,
            # what Debian does not build for this architecture, left out of the guest
            not_packaged=[Path(p).name for p in initramfs.NOT_PACKAGED.get(arch, ())],
            linux_image_version=version,
            headers_version=(kernel_mod.package_version(f"linux-headers-{release}")
                             if arch == "amd64" else version),
            linux_image_deb=deb.name,
            module_sources_sha256=src_hash,
            modules=list(latency_modules.MODULES),
            packages=packages,
            inputs=inputs,
        )
        _write_manifest(vm_dir, manifest)
    log(f"vm: {kernel} {arch} image ready in {vm_dir} (kernel {release}, "
        f"{manifest['kernel_file']})")
    return image
