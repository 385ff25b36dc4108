"""`station monitor`: campaigns on a schedule, every run in one lab store, a page per target
(docs/lab.md). schedule.py reads the schedule file, ledger.py is what ran (the store's memory
across restarts), runner.py the loop, regression.py the verdict, overview.py the pages."""
