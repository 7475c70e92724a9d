"""Admission-stage rules: why Kueue has not admitted the Workload (yet), one module per concern.

terminal (Finished, deactivated), eviction (preempted / evicted), checks (quota reserved, admission
checks), queues (the queue objects), kueue_message (Kueue's QuotaReserved message, by Template),
flavors (flavor-assignment failures and their numbers), order (not yet evaluated, StrictFIFO heads),
stalled (fits the unused quota, yet Kueue is silent).
`engine/registry.py` orders them.
"""
