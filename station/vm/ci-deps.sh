#!/bin/sh
# ci-deps.sh - install the Debian packages the VM target needs (run as root).
#
# The same lists as station/vm/hostdeps.py HOST_PACKAGES and ARCH_PACKAGES (a test keeps them equal); build_image()
# installs them itself when run as root, this script is for CI set-up and for sudo users.
# Everything else the image needs (the linux-image matching the headers) is fetched by build_image()
# with apt-get download, into the VM cache directory, never into the repository.
set -eu

PACKAGES="qemu-system-x86 linux-headers-amd64 linux-headers-rt-amd64 busybox-static dropbear-bin openssh-sftp-server kmod xz-utils zstd gcc make rt-tests stressapptest stress-ng procps rtla"
# the arm64 guests' (hostdeps.py ARCH_PACKAGES): their own programs are arm64 packages fetched
# into the VM cache, never installed
ARM64_PACKAGES="qemu-system-arm gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
PACKAGES="$PACKAGES $ARM64_PACKAGES"
export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -ne 0 ]; then
	echo "ci-deps.sh: must run as root (apt-get install $PACKAGES)" >&2
	exit 1
fi

need=""
for p in $PACKAGES; do
	dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null | grep -qx installed || need="$need $p"
done
if [ -n "$need" ]; then
	apt-get update -q
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $need
fi
