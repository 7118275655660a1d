"""Training stacks as data: what Megatron, NeMo, DeepSpeed, torchtitan and FSDP stacks run.

Each stack in ``hardware/stacks.json`` (with its source) says which attention kernel it calls, how
many HBM accesses its element-wise operators make (fused kernels or eager PyTorch composites), what
its selective recomputation recomputes, how ZeRO-3 gathers parameters, and the bytes it keeps per
gradient element. ``auto`` (the default) picks the stack a layout implies: ZeRO-3 without tensor or
pipeline parallelism is how FSDP stacks run (``fsdp``); everything else is priced as Megatron-Core
(``megatron``). Every plan names the stack it used and why.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from commcost.core.errors import InputError
from commcost.hardware import load_preset_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.parallel.layout import Layout

__all__ = ["STACKS", "Stack", "stack", "resolve_stack", "auto_is_fsdp", "given_stack_flag"]

STACKS = ("auto", "megatron", "nemo", "deepspeed", "torchtitan", "fsdp", "torchtitan-0.0")
"""``--stack`` values."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Stack:
    """One stack's behaviour (``hardware/stacks.json``)."""

    name: str
    """Registry key."""
    attention_kernel: str
    """``fa3`` (cuDNN / FlashAttention-3 class where the GPU has it) or ``fa2``."""
    norm_accesses: float
    """HBM element accesses per element of a norm's input (2: one fused read and write)."""
    activation_accesses_gated: float
    """Accesses per element of f of a gated activation (SwiGLU), reads of gate and up included."""
    activation_accesses: float
    """Accesses per element of f of a plain activation (GeLU)."""
    rotary_accesses: float
    """Accesses per element of Q and K of the rotary embedding."""
    loss_accesses_per_vocab: float
    """Accesses per token and vocabulary entry of the logits' cross-entropy, forward."""
    selective: str
    """What selective recomputation recomputes: ``attention`` (the attention core) or
    ``alternate_matmul`` (every other matmul's forward and every element-wise forward)."""
    zero3_gathers_per_layer: int
    """All-gathers ZeRO-3 issues per layer and pass (FSDP: 1 per wrapped block)."""
    grad_bytes: float
    """Bytes per gradient element held (fp32 main gradients: 4)."""
    loss_bytes_per_vocab: float
    """Bytes per token and vocabulary entry the loss holds at its peak (logits and the cross-entropy's buffers)."""
    fp8_weight_cast_per_micro_batch: bool
    """fp8 recipes cast the weights every micro-batch (torchao) rather than once a step (Transformer Engine)."""
    zero2_scatter_per_micro_batch: bool = False
    """ZeRO-2 reduce-scatters the gradients after every micro-batch's backward (DeepSpeed stage 2, FSDP
    ``SHARD_GRAD_OP``), where Megatron's distributed optimizer keeps full gradients until the last."""
    zero3_unshard_under_pp: bool = False
    """Under pipeline parallelism ZeRO-3 keeps each stage's parameters gathered for the step and reduces
    gradients once, on the last backward (torchtitan's FSDP2 with PP): one gather and one scatter per
    layer and step, the stage's weights and gradients held unsharded."""
    fp8_saves_inputs: bool = False
    """fp8 recipes save each GEMM's quantized input for the weight gradient (Transformer Engine), halving it."""
    sustained: float = 1.0
    """``u_stack``: the share of the kernels' benchmark rates this stack's training loop sustains
    (fitted: :mod:`commcost.workload.operators`)."""
    compiled: bool = False
    """torch.compile fuses the element-wise chains (accesses as fused kernels)."""
    main_grad_bytes: float = 2.0
    """``q_g`` of the memory model: bytes per parameter of the gradients the stack holds for the optimizer
    (Megatron-Core's fp32 ``main_grad`` buffer: 4; FSDP stacks' fp32 sharded gradients come with fp32 sharded
    parameters in place of the master copy, which totals as 2 + 2 + 12: 2)."""
    gated_mlp_saved_bytes: float = 6.0
    """Bytes a gated MLP keeps per element of its width besides the down projection's input: 6 eager
    (gate and up outputs, SiLU's output), 4 with a fused SwiGLU that saves only its input (Megatron-Core)."""
    compile_covers_loss: bool = True
    """torch.compile also compiles the loss (its accesses and bytes as a fused kernel's); False where the stack
    compiles the model's blocks only and the cross-entropy runs eager (torchtitan before 0.1)."""
    source: str = ""
    """Where the numbers come from."""


@lru_cache(maxsize=1)
def _table() -> dict:
    return load_preset_file("stacks.json")


@lru_cache(maxsize=32)
def stack(name: str, *, compiled: bool = False) -> Stack:
    """The :class:`Stack` ``name`` (not ``auto``), with ``compiled`` taking torch.compile's fused accesses."""
    rows = _table()["stacks"]
    if name not in rows:
        raise InputError(f"unknown stack {name!r} (valid: {', '.join(STACKS)})")
    row = {k: v for k, v in rows[name].items()}
    if compiled:
        loss_keys = () if row.get("compile_covers_loss", True) else ("loss_accesses_per_vocab", "loss_bytes_per_vocab")
        row.update({k: v for k, v in _table()["compiled"].items() if k != "source" and k not in loss_keys})
    return Stack(name=name, compiled=compiled, **row)


def resolve_stack(name: str, layout: Layout) -> tuple[str, str]:
    """``(stack, why)``: ``name`` itself, or for ``auto`` the stack the layout implies."""
    if name not in STACKS:
        raise InputError(f"unknown stack {name!r} (valid: {', '.join(STACKS)})")
    if name != "auto":
        return name, "given (--stack)"
    if auto_is_fsdp(layout.zero, layout.tp, layout.pp):
        return "fsdp", "auto: ZeRO-3 without TP or PP is how FSDP stacks run (--stack to pin it)"
    return "megatron", "auto: a Megatron-Core layout (--stack to pin it)"


def auto_is_fsdp(zero, tp, pp):
    """``auto``'s rule: ZeRO-3 without TP or PP is priced as ``fsdp``, everything else as ``megatron``.
    Array-safe (``commcost search`` applies it to columns)."""
    return (zero == 3) & (tp == 1) & (pp == 1)


def given_stack_flag(name: str, attribute: str, auto_value):
    """A stack field for a whole search: ``auto_value`` under ``auto`` (what both stacks ``auto`` resolves
    to agree on for the rows it applies to), else the given stack's ``attribute``."""
    return auto_value if name == "auto" else getattr(stack(name), attribute)
