"""Published training runs' layouts as data (``hardware/published_layouts.json``): what a stack's standard recipe,
or a paper, ran for one model, GPU count, sequence and batch. :mod:`commcost.workload.stacks` re-exports them."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from commcost.hardware import load_preset_file

__all__ = ["PublishedLayout", "published_layouts"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedLayout:
    """One published training run's layout (``hardware/published_layouts.json``, the layouts of
    tests/data/published_runs.csv and published_moe_runs.csv with their sources): what a stack's
    standard recipe, or a paper, ran for one model, GPU count, sequence and batch."""

    id: str
    """The run's id in tests/data/published_runs.csv (or published_moe_runs.csv)."""
    stack: str
    """The stack that ran it (``megatron``, ``nemo``, ``deepspeed``, ``torchtitan``, ``fsdp``, a past release of one, ``other`` (a PyTorch stack without an entry) or ``jax`` (MaxText, Pax))."""
    model: str
    """Model preset."""
    system: str
    """System preset it ran on."""
    gpus: int
    """GPUs W."""
    seq: int
    """Sequence length, tokens."""
    global_batch: int
    """Sequences per optimizer step."""
    precision: str
    """GEMM precision."""
    tp: int
    """Tensor-parallel degree."""
    pp: int
    """Pipeline stages."""
    vp: int
    """Virtual stages per pipeline stage."""
    cp: int
    """Context-parallel degree."""
    ep: int
    """Expert-parallel degree."""
    etp: int
    """Expert tensor parallelism as published (0: not stated, Megatron's default)."""
    zero: int
    """ZeRO stage (1: Megatron's distributed optimizer; 3: FSDP)."""
    sequence_parallel: bool
    """Megatron sequence parallelism."""
    recompute: str
    """``none``, ``selective`` or ``full``."""
    micro_batch: int
    """Sequences per micro-batch."""
    source: str
    """Where the run is published."""
    measured_step_s: float | None = None
    """The step the run measured, seconds: its published metric (step time, tokens/s/GPU, TFLOP/s or MFU)
    turned into seconds per step as tests/data/SOURCES.md defines each (benchmarks/plan_accuracy.py
    ``published_step_s``)."""


@lru_cache(maxsize=1)
def _published() -> tuple[PublishedLayout, ...]:
    return tuple(PublishedLayout(**row) for row in load_preset_file("published_layouts.json")["runs"])


def published_layouts(model: str, gpus: int, seq: int, global_batch: int) -> tuple[PublishedLayout, ...]:
    """The published layouts of ``model`` on ``gpus`` GPUs at this sequence and global batch (exact keys)."""
    return tuple(r for r in _published() if (r.model, r.gpus, r.seq, r.global_batch) == (model, gpus, seq,
                                                                                          global_batch))
