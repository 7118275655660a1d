"""Calibration: read nccl-tests logs, measure collectives with torch.distributed, fit alpha and beta."""
