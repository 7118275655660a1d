"""commcost.workload.shape: see docs/architecture.md."""
