"""commcost.analyses: see docs/architecture.md."""
