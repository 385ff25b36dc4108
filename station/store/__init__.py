"""Where results live: one run's directory, written as it goes and sealed (`run_store.py`), and the
campaign's results as one queryable store (`result_store.py`)."""
