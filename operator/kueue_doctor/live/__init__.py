"""Talking to a live cluster: one-shot snapshots (snapshot.py) and the operator (runtime.py builds its parts)."""
