"""Evaluations: the Evaluations dock (list, new / resume with progress, report per question, compare)
<-> core.eval (jobs.py assembles a job, compare.py reads and compares folders)."""
