"""irq-station: interrupt latency of real-time Linux targets, measured by the
target's software and by an oscilloscope, compared event class by event class.

The public API lives in :mod:`station.api`.
"""

import os as _os

# The station's linear algebra is small (a line through a few hundred points, the dot products of a
# batch): OpenBLAS's worker threads only spin between such calls, each taking a core from the work
# beside it (one run's analysis used 1.7 cores for 1 core of work, and two runs analysed at once
# shared their cores with four spinning threads). One thread, unless the user set it: this must come
# before numpy is first imported, which is why it is here.
_os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import warnings as _warnings

# asyncssh imports cryptography's DSA classes, which cryptography 48 and later mark deprecated as
# they are touched: nine lines of warnings on the stderr of every command that opens SSH, where a
# user reads the station's one-line errors. The station offers and accepts no DSA key; the warning
# says nothing about its use, so that one message is silenced (every other warning stays).
_warnings.filterwarnings("ignore", message="DSA is deprecated", category=UserWarning)
