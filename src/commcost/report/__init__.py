"""Renderers: the only code that formats or prints. No renderer computes a cost."""
