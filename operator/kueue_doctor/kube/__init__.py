"""Reading Kubernetes and Kueue objects tolerantly: versions, quantities, times, conditions."""
