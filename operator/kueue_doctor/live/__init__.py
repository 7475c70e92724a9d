"""Talking to a live cluster: one-shot snapshots now, the operator later."""
