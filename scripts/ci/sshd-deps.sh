#!/bin/sh
# OpenSSH's server, for the tests that use this machine itself as a real target
# (tests/local_sshd.py starts its own sshd on 127.0.0.1 with throw-away keys; the
# system's sshd service is neither enabled nor started). Debian/Ubuntu; idempotent.
set -eu

if [ -x /usr/sbin/sshd ]; then
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# a policy-rc.d (if there is none) keeps the package's post-install from starting the system sshd
ours=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    ours=1
fi
$SUDO apt-get install -y -qq --no-install-recommends openssh-server procps >/dev/null || status=$?
[ -z "$ours" ] || $SUDO rm -f /usr/sbin/policy-rc.d
[ -z "${status:-}" ] || exit "$status"
/usr/sbin/sshd -V 2>&1 | head -1 || true
