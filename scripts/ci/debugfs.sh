#!/bin/sh
# debugfs at /sys/kernel/debug, where the kernel shows its fair deadline server
# (sched/fair_server): the tests that check the station's judgement of this machine's
# kernel read their truth there. systemd mounts it on a usual Debian system; a fresh
# container or CI machine may not have it mounted. Idempotent; says plainly when the
# kernel refuses it (those tests then say debugfs is missing).
set -eu

DIR=/sys/kernel/debug
if grep -q " $DIR debugfs " /proc/mounts; then
    exit 0
fi
if ! mount -t debugfs none "$DIR" 2>/dev/null; then
    echo "debugfs: could not mount it at $DIR (not in this kernel, or not allowed here):" \
        "the tests that read the kernel's scheduler facts will say so" >&2
fi
exit 0
