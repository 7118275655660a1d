"""commcost.core: see docs/architecture.md."""
