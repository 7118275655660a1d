"""Presets (GPUs, fabrics, systems, models) as rows: the one reader of each preset file.

The one reader of each preset file: ``gpus()``, ``fabrics()``, ``systems()`` and ``models()``
(with the model aliases, :data:`MODEL_ALIASES`, resolved by :func:`model_key`). The one shape class
(:class:`commcost.workload.transformer.TransformerSpec`, which every command, the DDP timeline
included, works on) gets its row from here.

The numbers live in ``commcost/hardware/{gpus,fabrics,systems,models}.json`` (STYLE.md,
conventions 2 and 6): every number has its unit in its key, bandwidths say
whether they are per direction or bidirectional, and every entry names its
source. The topology a system row gives is built in ``comm`` (:mod:`commcost.comm.systems`), above
this layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from commcost.hardware import load_preset_file, lookup

__all__ = ["PresetEntry", "gpus", "gpu_row", "kernels", "fabrics", "systems",
           "system_names", "preset_entries", "MODEL_ALIASES", "models", "model_key", "model_row"]


def _table(file_name: str) -> dict[str, Any]:
    return {k: v for k, v in load_preset_file(file_name).items() if not k.startswith("_")}


def gpus() -> dict[str, dict[str, Any]]:
    """GPU presets by name (``gpus.json``)."""
    return _table("gpus.json")


@lru_cache(maxsize=64)
def gpu_row(gpu: str) -> tuple[float, float]:
    """``(memory_bytes, memory_bandwidth_bytes_per_s)`` of GPU preset ``gpu`` (gpus.json, parsed once):
    the one reader of a GPU's memory for plan, search, budget and the compute model."""
    row = lookup(gpus(), gpu, "GPU")
    return float(row["memory_bytes"]), float(row["memory_bandwidth_bytes_per_s"])


@lru_cache(maxsize=1)
def kernels() -> dict[str, Any]:
    """``kernels.json`` (per-GPU SMs, GEMM and attention efficiencies, sustained fractions), parsed once.
    Read-only for callers; an accuracy benchmark that overrides a fraction clears this cache after."""
    return load_preset_file("kernels.json")


def fabrics() -> dict[str, dict[str, Any]]:
    """Fabric presets by name (``fabrics.json``)."""
    return _table("fabrics.json")


def system_gpu(name: str) -> str:
    """The GPU preset of system ``name`` (exact key; unknown names list the valid ones)."""
    return lookup(systems(), name, "system")["gpu"]


def systems() -> dict[str, dict[str, Any]]:
    """System presets by name (``systems.json``)."""
    return _table("systems.json")


def system_names() -> list[str]:
    """Sorted names of the system presets."""
    return sorted(systems())


MODEL_ALIASES = {"125m": "gpt2-small", "1.3b": "gpt2-xl", "7b": "llama2-7b"}
"""The scaling-analysis seed's model names, as aliases of the registry's shapes (the seed calls them
"125M (GPT-2 small)", "1.3B (GPT-2 XL equiv)", "7B (Llama-7B equiv)"); every ``--model`` flag takes
them; ``commcost scaling`` keeps the seed's own rounded parameter counts and compute times for them,
to reproduce the seed."""


def models() -> dict[str, dict[str, Any]]:
    """Model presets by name (``models.json``): the one loader of the model registry."""
    return _table("models.json")


def model_key(name: str) -> str:
    """The registry key of model ``name``: an alias of :data:`MODEL_ALIASES` resolved, any other
    name unchanged (it is looked up by exact key later)."""
    return MODEL_ALIASES.get(name, name)


def model_row(name: str, what: str = "model") -> dict[str, Any]:
    """The ``models.json`` row of model ``name`` (exact key or an alias); an unknown name lists the
    valid ones, calling the model ``what`` in the message."""
    return lookup(models(), model_key(name), what)


@dataclass(frozen=True, slots=True, kw_only=True)
class PresetEntry:
    """One preset as ``commcost presets`` lists it."""

    kind: str
    """``gpu``, ``fabric`` or ``system``."""
    name: str
    """Its exact look-up key."""
    summary: str
    """One line of its main numbers, with units."""
    source: str
    """Where the numbers come from."""


def preset_entries() -> list[PresetEntry]:
    """Every preset, GPUs then fabrics then systems, for listing."""
    out: list[PresetEntry] = []
    for name, g in gpus().items():
        out.append(PresetEntry(kind="gpu", name=name, source=g["source"], summary=(
            f"{g['dense_bf16_flops_per_s'] / 1e12:,.0f} TFLOP/s dense bf16, "
            f"{g['memory_bytes'] / 1e9:g} GB, {g['memory_bandwidth_bytes_per_s'] / 1e12:g} TB/s HBM")))
    for name, f in fabrics().items():
        direction = "per GPU per direction" if f["direction"].startswith("per direction") else f["direction"]
        s = (f"{f['tier']}: {f['achievable_bandwidth_bytes_per_s'] / 1e9:g} GB/s achievable {direction} "
             f"(line {f['line_bandwidth_bytes_per_s'] / 1e9:g} GB/s), {f['step_latency_s'] * 1e6:g} us per step")
        if "in_network_bandwidth_bytes_per_s" in f:
            s += f", NVLS {f['in_network_bandwidth_bytes_per_s'] / 1e9:g} GB/s algbw"
        out.append(PresetEntry(kind="fabric", name=name, summary=s,
                               source=f"{f['source']}; achievable: {f['achievable_source']}"))
    for name, sp in systems().items():
        out.append(PresetEntry(kind="system", name=name, source=sp["source"], summary=(
            f"{sp['gpus_per_node']} x {sp['gpu']} per node, {sp['intra_fabric']} inside, "
            f"one {sp['inter_fabric']} NIC per GPU across nodes"
            f"{', NVLS' if sp['in_network'] else ''}"
            f"{(', NCCL protocols LL/LL128/Simple' if sp.get('nccl_ll128', True) else ', NCCL protocols LL/Simple (LL128 off: no NVLink)') if sp['nccl_protocols'] else ''}"
            f"{', congests past ' + str(sp['full_bandwidth_nodes']) + ' node(s)' if sp.get('full_bandwidth_nodes') else ''}"
            f"{', pods of ' + str(sp['pod_nodes']) + ' nodes under a spine (x' + format(sp.get('spine_oversubscription', 1.0), 'g') + ' across pods)' if sp.get('pod_nodes') else ''}")))
    return out
