#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# ci-deps.sh - install what the kernel-module build and the style check need.
#
#   * Debian's kernel headers (linux-headers-amd64) to build the mainline
#     modules against; the CI machine's running kernel is irrelevant.
#   * the arm64 cross-compiler Debian's arm64 kernel is built with
#     (gcc-aarch64-linux-gnu: gcc 12) and its C library (libc6-dev-arm64-cross,
#     for the static tools); the arm64 headers themselves are fetched as
#     foreign packages by station/vm/cross.py, never installed.
#   * libgpiod v1 (libgpiod-dev: header, libgpiod.a for the static build)
#     for tools/gpio_responder_user, and gpiod (gpiodetect, gpioinfo, ...).
#   * the AVR responder (target_modules/avr): gcc-avr, binutils-avr and
#     avr-libc for the ATmega328P firmware, libsimavr-dev and pkg-config for
#     the host harness that runs it in simavr; arduino-core-avr for the seed's
#     sketch on the real Arduino core (target_modules/avr/sketch).
#   * checkpatch.pl and the two data files it reads (spelling.txt,
#     const_structs.checkpatch), taken from Debian's linux-source tarball and
#     kept in a cache directory so later runs cost nothing.
#
# Run as root. Prints the checkpatch path on its last line.
# Environment: IRQS_CI_CACHE (default /var/cache/irq-station).
set -eu

CACHE=${IRQS_CI_CACHE:-/var/cache/irq-station}
CP_DIR=$CACHE/checkpatch/scripts
export DEBIAN_FRONTEND=noninteractive

if [ "$(id -u)" -ne 0 ]; then
	echo "ci-deps.sh: must run as root (apt-get install)" >&2
	exit 1
fi

. "$(dirname "$0")/../../scripts/ci/install-missing.sh"
install_missing linux-headers-amd64 kmod gcc make perl xz-utils libgpiod-dev gpiod \
	 gcc-avr binutils-avr avr-libc libsimavr-dev pkg-config arduino-core-avr \
	 gcc-aarch64-linux-gnu libc6-dev-arm64-cross

if [ ! -s "$CP_DIR/checkpatch.pl" ] || [ ! -s "$CP_DIR/spelling.txt" ] ||
   [ ! -s "$CP_DIR/const_structs.checkpatch" ]; then
	mkdir -p "$CP_DIR"
	work=$(mktemp -d "$CACHE/dl.XXXXXX")
	trap 'rm -rf "$work"' EXIT
	# The package matching the installed headers' series (6.1 on bookworm).
	src=$(apt-cache depends linux-source 2>/dev/null |
	      sed -n 's/^ *Depends: \(linux-source-[0-9.]*\)$/\1/p' | head -n1)
	src=${src:-linux-source-6.1}
	(cd "$work" && chown _apt "$work" 2>/dev/null; apt-get download -q "$src")
	deb=$(ls "$work"/*.deb)
	tarball=$(dpkg-deb -c "$deb" | awk '{print $6}' |
		  grep -E '^\./usr/src/linux-source-[0-9.]+\.tar\.xz$' | head -n1)
	top=$(basename "$tarball" .tar.xz)
	# Stream: no 1 GB unpacked tree on disk, only the three files.
	dpkg-deb --fsys-tarfile "$deb" | tar -xOf - "$tarball" |
		tar -xJf - -C "$work" \
			"$top/scripts/checkpatch.pl" \
			"$top/scripts/spelling.txt" \
			"$top/scripts/const_structs.checkpatch"
	for f in checkpatch.pl spelling.txt const_structs.checkpatch; do
		mv "$work/$top/scripts/$f" "$CP_DIR/$f"
	done
	chmod 0755 "$CP_DIR/checkpatch.pl"
	echo "$src" > "$CP_DIR/SOURCE"
fi

echo "$CP_DIR/checkpatch.pl"
