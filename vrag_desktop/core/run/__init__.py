"""A run's life: assembling an agent from a profile and corpora, the run store, and the views
of a run (reasoning graph, evidence, transcript)."""
