"""The VM target: Debian's kernel under QEMU, reached over real SSH, with our modules built for it.

    image = build_image()                      # cached in default_vm_dir(); rebuilt when inputs
    change with VirtualMachine(image, ssh_port=10022) as vm:
        ...                                    # ssh root@127.0.0.1 -p 10022 -i image.identity_file
"""

from station.vm.errors import VmError
from station.vm.hostdeps import ensure_host_packages, missing_host_packages
from station.vm.image import VmImage, build_image
from station.vm.machine import VirtualMachine
from station.vm.paths import default_vm_dir

__all__ = [
    "VirtualMachine",
    "VmError",
    "VmImage",
    "build_image",
    "default_vm_dir",
    "ensure_host_packages",
    "missing_host_packages",
]
