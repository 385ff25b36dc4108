"""A campaign carried out: the loop over its runs (`loop.py`), one run's lifecycle from set-up to
seal (`run.py`), and the live progress on a terminal (`terminal.py`)."""
