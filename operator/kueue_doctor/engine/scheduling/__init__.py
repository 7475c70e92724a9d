"""Scheduling-stage rules: Kueue admitted the Workload, why are its Pods not running?

owners (the owner kinds Kueue suspends, who wrote suspend, expected Pods), dispatch (MultiKueue, a suspended
owner), ghost (quota held with nothing behind it), workload_pods (Pods created, scheduled, started), nodes
(what the flavor's nodes look like).
Objects first (Pod conditions, scheduling gates, container states, Kueue's PodsReady), Events only for
what no object holds (the Job controller's FailedCreate).
"""
