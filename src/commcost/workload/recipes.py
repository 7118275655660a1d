"""What a run does when the user names no stack and no recipe flag: what the published recipes of the stack the
layout implies run, not the framework's bare code defaults. ``plan`` and ``search`` assume them, and say so on one
``assumed:`` line (:func:`assumed_line`); benchmarks/plan_accuracy.py scores its no-stack figure with them.

**Dense runs** (:func:`dense_recipe_defaults`), for the stack ``--stack auto`` resolves the layout to:

* TP communication overlap (``tp_comm_overlap``) where that stack's recipes run it and ``t > 1``: Megatron-Core's
  (``megatron``, ``nemo``): Megatron-Bridge / NeMo performance recipes set ``tp_comm_overlap=True`` (``stacks.json``
  ``recipe_tp_comm_overlap``, with its source; ``commcost search`` prices those stacks' layouts with it on too, row
  by row); torchtitan's async TP is opt-in (``enable_async_tensor_parallel = false`` in its Llama 3 configs), so
  ZeRO-3 with TP, which auto implies is torchtitan's, runs without it, and the FSDP stacks run no TP.
* the data-parallel bucket the stack takes when its recipe sets none (``stacks.json`` ``recipe_dp_bucket``):
  Megatron-Core's ``max(40,000,000, 1,000,000 d c)`` parameters (``DistributedDataParallelConfig.bucket_size``,
  ``None`` in the recipes), at the plan's bytes per reduced gradient; only where buckets run (ZeRO 0-2 with
  ``d c > 1``). Other stacks reduce through PyTorch DDP, whose 25 MiB is the plan's default already.

Everything else a recipe sets is either the layout (ZeRO stage, recomputation, sequence parallelism: the user's
question, given by flags) or the stack's behaviour (its attention kernel, fused kernels, fp32 or bf16 gradient
buffers: ``stacks.json``, taken with the stack).

Megatron-Core's code defaults (expert tensor parallelism = t, the all-to-all dispatcher, nothing overlapped) are
not what its MoE recipes run: every Megatron-Bridge performance recipe for MoE sets
``expert_tensor_parallel_size = 1`` and the ``alltoall`` token dispatcher, and the H100 recipes turn on
``moe_a2a_overlap`` (Megatron-Core's 1F1B all-to-all overlap, ``--overlap-moe-expert-parallel-comm``)
(Megatron-Bridge v0.2.1 ``scripts/performance/configs/qwen3/workload_base_configs.py`` QWEN3_30B_A3B_H100 and
QWEN3_235B_A22B_H100, ``configs/deepseek/workload_base_configs.py`` DEEPSEEK_V3_H100; NVIDIA
Megatron-MoE-ModelZoo ``best_practice`` readmes run the same). torchtitan's MoE runs expert tensor parallelism 1
by default (``parallelism.expert_tensor_parallel_degree = 1``) and overlaps nothing. So, with no ``--stack``, no
``--etp``, ``--a2a`` or ``--moe-overlap``:

* expert TP 1, where ``e`` divides ``t d c`` (else the layout's own default);
* the all-to-all dispatcher (``nccl``);
* the 1F1B all-to-all overlap where the implied stack is Megatron-Core's and the schedule can run it (no pipeline,
  or an interleaved one: Megatron-Core needs virtual stages for it), else none.
"""

from __future__ import annotations

from commcost.workload.stacks import AUTO_STACKS, _table, auto_kind, implied_stack, recipe_tp_comm_overlap

__all__ = ["MOE_RECIPE_SOURCE", "overlapping_stacks", "moe_recipe_defaults", "recipe_line", "dense_recipe_defaults",
           "recipe_bucket_params", "assumed_line", "dense_items", "moe_items", "search_tp_overlap_items"]

MOE_RECIPE_SOURCE = ("Megatron-Bridge performance recipes (scripts/performance/configs/{qwen3,deepseek}/"
                     "workload_base_configs.py: expert_tensor_parallel_size 1, alltoall dispatcher, moe_a2a_overlap "
                     "on H100); torchtitan expert_tensor_parallel_degree 1")
"""Where the defaults come from (module docstring)."""


def overlapping_stacks() -> tuple[str, ...]:
    """Stacks (by family prefix) whose MoE recipes run the 1F1B all-to-all overlap: ``stacks.json``
    ``recipe_moe_a2a_overlap``, with its source (the stack names live in the data file, not here)."""
    return tuple(k for k, v in _table().get("recipe_moe_a2a_overlap", {}).items() if v is True)


def moe_recipe_defaults(*, stack: str, tp: int, dp: int, cp: int, ep: int, pp: int, vp: int) -> dict:
    """``{etp, a2a, moe_overlap}`` the implied stack's recipes run (module docstring); ``stack`` the resolved
    stack's name."""
    etp = 1 if (tp * dp * cp) % ep == 0 else 0
    overlap = ("1f1b" if stack.startswith(overlapping_stacks()) and (pp == 1 or vp > 1) else "none")
    return {"etp": etp, "a2a": "nccl", "moe_overlap": overlap}


def recipe_line(d: dict) -> str:
    """The one line that says which defaults were assumed."""
    return (f"no --stack, no MoE flag: expert TP {d['etp'] or 'default'}, {d['a2a']} all-to-all, overlap "
            f"{d['moe_overlap']}, as Megatron-Core's MoE recipes run")


def recipe_bucket_params(stack: str, *, dp: int, cp: int) -> int | None:
    """Parameters per data-parallel bucket that stack ``stack`` takes when its recipe sets none, or None (PyTorch DDP's
    default, the plan's own): ``max(P_min, P_rank d c)`` with ``P_min``, ``P_rank`` from ``stacks.json``
    ``recipe_dp_bucket`` (Megatron-Core: 40,000,000 and 1,000,000; ``d c`` the data-parallel group with context
    parallelism)."""
    row = _table().get("recipe_dp_bucket", {}).get(stack)
    if not isinstance(row, dict):
        return None
    return max(int(row["params_min"]), int(row["params_per_rank"]) * dp * cp)


def dense_recipe_defaults(*, stack: str, tp: int, dp: int, cp: int, zero: int, grad_bytes: float) -> dict:
    """``{tp_comm_overlap, bucket_cap_bytes}`` stack ``stack``'s published recipes run (module docstring): the overlap
    where its recipes turn it on and ``t > 1``; the bucket ``P x q`` bytes (:func:`recipe_bucket_params` ``P``,
    ``q = grad_bytes`` per reduced gradient) where buckets run (ZeRO 0-2, ``d c > 1``), else None (DDP's default)."""
    params = recipe_bucket_params(stack, dp=dp, cp=cp) if zero < 3 and dp * cp > 1 else None
    return {"tp_comm_overlap": tp > 1 and recipe_tp_comm_overlap(stack),
            "bucket_cap_bytes": None if params is None else int(params * grad_bytes)}


def assumed_line(stack: str, items: list[str]) -> str:
    """The one ``assumed:`` line of ``plan`` and ``search`` with no ``--stack``: ``items`` (what was assumed, in
    words) as ``stack``'s recipes run them; empty when nothing was."""
    if not items:
        return ""
    return f"no --stack, no recipe flag: {', '.join(items)}, as {stack}'s published recipes run"


def dense_items(d: dict, *, grad_bytes: float) -> list[str]:
    """The words of :func:`dense_recipe_defaults`'s answer ``d`` for :func:`assumed_line`."""
    items = ["TP communication overlap"] if d.get("tp_comm_overlap") else []
    if d.get("bucket_cap_bytes"):
        params = d["bucket_cap_bytes"] / grad_bytes
        items.append(f"DP buckets of {params / 1e6:,.0f}M parameters ({d['bucket_cap_bytes'] / 2**20:,.1f} MiB)")
    return items


def moe_items(d: dict) -> list[str]:
    """The words of :func:`moe_recipe_defaults`'s answer ``d`` for :func:`assumed_line`."""
    return [f"expert TP {d['etp'] or 'default'}", f"{d['a2a']} all-to-all", f"MoE overlap {d['moe_overlap']}"]


def search_tp_overlap_items(fixed: dict | None = None) -> tuple[str, list[str]]:
    """``(stack, items)`` for ``search``'s ``assumed:`` line with no ``--stack`` and TP not fixed to 1: the stacks
    ``--stack auto`` implies (``stacks.json`` ``auto_stacks``) for the layouts the ``fixed`` dimensions (``--fix``)
    leave (:func:`commcost.workload.stacks.auto_kind` of each ZeRO stage allowed, with ``t > 1``) whose recipes run TP
    communication overlap, which ``search`` prices those layouts with
    (:func:`commcost.analyses.plan.grid_memory.tp_overlap_column`), as :func:`dense_recipe_defaults` gives ``plan``
    for one layout. The bucket is searched, not assumed."""
    fixed = fixed or {}
    tp, pp, cp = fixed.get("tp", 2), fixed.get("pp", 1), fixed.get("cp", 1)
    zeros = (fixed["zero"],) if "zero" in fixed else (0, 1, 2, 3)
    implied = {implied_stack(auto_kind(z, tp, pp, cp)) for z in zeros}
    running = [s for s in AUTO_STACKS if s in implied and recipe_tp_comm_overlap(s)]
    return (" and ".join(running), ["TP communication overlap"]) if running else ("", [])
