"""``--from PATH`` in ``plan`` and ``search``: a framework's config file (:mod:`commcost.formats.readers`) sets
the flags it states; a flag typed beside it overrides it and is reported as an override; values left to the
framework's default and settings that are not modelled are said (stderr, and ``from`` in ``plan --json``).

Part of the input builder: it returns a new Namespace, the command line's with the file's values filled in,
which :func:`commcost.cli.inputs_plan.plan_request` then reads as if they had been typed (the Namespace the
parser made is not written to)."""

from __future__ import annotations

import argparse

from commcost.cli import _args as A
from commcost.formats.job import resolve_job
from commcost.formats.hf_config import spec_from_hf_config
from commcost.formats.readers import read_job
from commcost.workload.transformer import model_spec

__all__ = ["add_from_argument", "apply_from", "LAYOUT_DESTS", "SHAPE_DESTS"]

LAYOUT_DESTS = ("dp", "tp", "pp", "vp", "cp", "ep", "etp", "zero", "hsdp", "sequence_parallel", "micro_batch",
                "uneven_pipeline", "split_counts_ends", "cpu_offload_layers", "recompute")
"""Flags of the layout (``search`` explores them instead: the file's are reported, not fixed)."""
SHAPE_DESTS = ("layers", "hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "experts", "top_k",
               "expert_ffn_hidden", "gated_mlp")
"""Shape flags a Megatron or NeMo file may carry (dropped when ``--model``/``--hf-config`` names the model)."""


def add_from_argument(p: argparse.ArgumentParser) -> None:
    """``--from PATH`` (plan and search)."""
    p.add_argument("--from", dest="from_file", metavar="PATH",
                   help="a torchtitan .toml, Megatron-LM argument file, NeMo/Megatron-Bridge .yaml or DeepSpeed "
                        ".json: the layout, batch, sequence, recomputation, precision and stack it states "
                        "(flags beside it override it)")


def _layers(merged: dict) -> int | None:
    """The model's layer count (for virtual stages), from the flags as the file fills them in."""
    if merged.get("hf_config"):
        return spec_from_hf_config(merged["hf_config"]).layers
    if merged.get("model") is not None:
        return model_spec(merged["model"]).layers
    return merged.get("layers")


def apply_from(args: argparse.Namespace, *, search: bool = False) -> tuple[argparse.Namespace, dict | None]:
    """``(namespace, summary)``: a new Namespace, ``args`` with ``--from``'s values filled in (module docstring),
    and the summary ``plan --json`` carries as ``from`` (``args`` itself and None without ``--from``)."""
    path = getattr(args, "from_file", None)
    if path is None:
        return args, None
    job = read_job(path)
    merged = dict(vars(args))
    given = merged.get("given_flags", frozenset())
    named_model = bool({"model", "hf_config"} & given) or any(d in given for d in SHAPE_DESTS)
    overrides, applied, dropped = [], {}, []
    values = dict(job.values)
    if "gpus" in values and "gpus" not in given and not search:
        merged["gpus"] = values.pop("gpus")
    first = {k: v for k, v in values.items() if k in ("model",) + SHAPE_DESTS}
    for dest, value in first.items():
        if named_model:
            if merged.get(dest) != value:
                dropped.append(f"{dest} = {value}")
        else:
            merged[dest] = applied[dest] = value
    resolved, defaults = resolve_job(job, gpus=merged.get("gpus"), layers=_layers(merged))
    for dest, value in resolved.items():
        if dest in first or dest == "gpus" or dest not in merged or (search and dest in LAYOUT_DESTS):
            continue
        if dest in given:
            if merged[dest] != value:
                overrides.append(f"--{dest.replace('_', '-')} {merged[dest]} (the file: {value})")
            continue
        merged[dest] = applied[dest] = value
    layout = {d: resolved[d] for d in LAYOUT_DESTS if d in resolved}
    for line in overrides:
        A.warn(f"--from {path}: overridden by the command line: {line}")
    for dest, value, why in defaults:
        A.warn(f"--from {path}: {dest} = {value} is the framework's default ({why})")
    for key in job.unread:
        A.warn(f"--from {path}: not modelled: {key}")
    if dropped:
        A.warn(f"--from {path}: the model named on the command line replaces the file's shape ({', '.join(dropped)})")
    if search and layout:
        A.warn(f"--from {path}: search explores the layout; the file's ({', '.join(f'{k} {v}' for k, v in layout.items())}) "
               "is not fixed (--fix keeps a dimension)")
    return argparse.Namespace(**merged), {
        "path": path, "framework": job.framework, "applied": applied, "overrides": overrides,
        "defaults": [{"flag": d, "value": v, "why": w} for d, v, w in defaults], "not_modelled": list(job.unread)}
