"""The bench: its parts (target, scope, generator, load hosts, twin) opened, checked and closed as
one (`bench.py`), and the sessions with its instruments (`scope_session.py`,
`generator_session.py`)."""
