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
