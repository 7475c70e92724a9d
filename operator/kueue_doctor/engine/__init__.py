"""The diagnosis engine: pure functions from objects to verdicts (see `diagnose.py`)."""
