"""commcost.analyses.drill: see docs/architecture.md."""
