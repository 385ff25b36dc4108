"""Anytime-valid inference (issue 50): confidence sequences that hold at every time at once, so a
campaign may look at them after every round and stop when they answer its question without
breaking their coverage (an ordinary interval, looked at after every round, does not hold)."""
