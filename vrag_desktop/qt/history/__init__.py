"""The History dock: past runs, reopening and step-by-step replay."""
