"""What a MoE run does when the user names no stack and no recipe flag: what the published recipes of the stack the
layout implies run, not the framework's bare code defaults.

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

from commcost.workload.stacks import _table

__all__ = ["MOE_RECIPE_SOURCE", "overlapping_stacks", "moe_recipe_defaults", "recipe_line"]

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
