"""The first-run dialog: the ways to get a model on this machine, and the recorded examples."""
