"""Small pieces every layer uses and that use nothing of the station: units and their formatting,
a run's live progress counts, lazy imports, the lifetimes of helper processes and remote starts,
and what the latency modules are called (the station's side and the twin that plays them)."""
