#!/bin/sh
# tracefs at /sys/kernel/tracing, for the tests that trace this machine (the interruption
# detector's irq tracepoints). systemd mounts it on a usual Debian system; a fresh container or
# CI machine may not have it mounted. Idempotent; says plainly when the kernel refuses it.
set -eu

DIR=/sys/kernel/tracing
if [ -e "$DIR/instances" ]; then
    exit 0
fi
if ! mount -t tracefs nodev "$DIR" 2>/dev/null; then
    echo "tracefs: could not mount it at $DIR (no tracefs in this kernel, or not allowed here):" \
        "the tests that trace this machine will say so" >&2
fi
exit 0
