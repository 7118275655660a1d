"""The scaling-analysis seed's presets: its models, its two flat fabrics and its run-wide settings.

The numbers are the packaged data file ``scaling_seed.json`` (each with its source); this module
turns them into frozen dataclasses in SI units, once, for :mod:`commcost.analyses.scaling`.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.comm.topology import Link, Topology
from commcost.hardware import load_preset_file, lookup
from commcost.core.units import GB, MS

__all__ = ["SEED_PRESET_FILE", "ModelPreset", "FabricPreset", "SeedDefaults", "seed_models", "seed_fabrics",
           "seed_defaults", "seed_two_tier"]

SEED_PRESET_FILE = "scaling_seed.json"
"""The packaged preset file holding the seed's models, fabrics and defaults."""



@dataclass(frozen=True, slots=True, kw_only=True)
class ModelPreset:
    """A model of the seed: its size and its (illustrative) compute time."""

    key: str
    """Exact look-up key, e.g. ``"7b"``."""
    name: str
    """Display name, as the seed spells it, e.g. ``"7B (Llama-7B equiv)"``."""
    params: float
    """Parameter count (1e9 per billion, never 1024)."""
    compute_s: float
    """Compute time of one step on one GPU ``t_c``, seconds."""
    source: str
    """Where the numbers come from."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricPreset:
    """A fabric of the seed: one flat link shared by every rank."""

    key: str
    """Exact look-up key, e.g. ``"nvlink"``."""
    name: str
    """Display name, e.g. ``"NVLink"``."""
    link: Link
    """Per-rank bandwidth ``B`` and per-ring-step latency ``a``."""
    flat_ring_max_gpus: int | None
    """Largest group over which a flat ring at this bandwidth exists on common
    systems (8 for NVLink on DGX/HGX); ``None`` when unlimited."""
    flat_ring_note: str | None
    """Why the flat ring stops being physical beyond ``flat_ring_max_gpus``."""
    source: str
    """Where the numbers come from."""
    note: str
    """What the numbers mean physically (one-way or bidirectional, domain size)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SeedDefaults:
    """The seed's run-wide settings."""

    bytes_per_grad: int
    """Bytes per gradient element (bf16: 2)."""
    overhead_s: float
    """Serial overhead per step ``t_o``, seconds."""
    gpu_counts: tuple[int, ...]
    """GPU counts of the results table."""
    overlap_fraction: float
    """Overlap fraction ``f`` of the seed's partial-overlap analysis."""
    overlap_model_key: str
    """The model of the seed's printed partial-overlap analysis."""
    overlap_gpu_counts: tuple[int, ...]
    """GPU counts of the seed's printed partial-overlap analysis."""
    overlap_overhead_s: float
    """Serial overhead in that analysis (the seed uses none), seconds."""


def _raw() -> dict:
    return load_preset_file(SEED_PRESET_FILE)


def seed_models() -> dict[str, ModelPreset]:
    """The seed's models by key (a fresh dict on every call)."""
    return {key: ModelPreset(key=key, name=m["name"], params=float(m["params"]),
                             compute_s=m["compute_ms"] * MS, source=m["source"])
            for key, m in _raw()["models"].items()}


def seed_fabrics() -> dict[str, FabricPreset]:
    """The seed's fabrics by key; GB/s and ms converted to SI here, once."""
    return {key: FabricPreset(
                key=key, name=f["name"],
                link=Link(bandwidth_bytes_per_s=f["bandwidth_gb_per_s"] * GB,
                          latency_s=f["latency_ms_per_ring_step"] * MS),
                flat_ring_max_gpus=f["flat_ring_max_gpus"], flat_ring_note=f["flat_ring_note"],
                source=f["source"], note=f["note"])
            for key, f in _raw()["fabrics"].items()}


def seed_defaults() -> SeedDefaults:
    """The seed's run-wide settings, SI."""
    raw = _raw()
    o = raw["overlap_analysis"]
    return SeedDefaults(
        bytes_per_grad=raw["bytes_per_grad"], overhead_s=raw["serial_overhead_ms"] * MS,
        gpu_counts=tuple(raw["gpu_counts"]), overlap_fraction=raw["overlap_fraction"],
        overlap_model_key=o["model"], overlap_gpu_counts=tuple(o["gpu_counts"]),
        overlap_overhead_s=o["serial_overhead_ms"] * MS,
    )


def seed_two_tier(gpus_per_node: int, max_gpus: int) -> Topology:
    """The seed's two fabrics as tiers: NVLink inside nodes of ``gpus_per_node`` GPUs,
    InfiniBand (one NIC per GPU) across ``ceil(max_gpus / gpus_per_node)`` nodes."""
    fabrics = seed_fabrics()
    return Topology(gpus_per_node=gpus_per_node, nodes=max(1, -(-max_gpus // gpus_per_node)),
                    intra=lookup(fabrics, "nvlink", "fabric").link,
                    inter=lookup(fabrics, "infiniband", "fabric").link,
                    name=f"NVLink x {gpus_per_node} + InfiniBand")
