"""commcost.analyses.plan: see docs/architecture.md."""
