"""What a run does with the scope: captures to files (`scope_capture.py`) and the accounting of what
a capture saw against what it should have (`accounting.py`)."""
