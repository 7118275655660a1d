"""Peaks per precision, the published MFU frontier, and the one-rate compute model.

``P_peak(x)``: the GPU's dense tensor-core peak for precision ``x`` (``hardware/compute.json``, each
with its source). By default ``plan`` prices compute by operator (:mod:`commcost.workload.operators`); with a
given efficiency (``--efficiency``, ``--mfu``, ``--measured-step-s``, a calibration) it uses one rate
for every FLOP, ``T = F / (P_peak(x) eta) + Q / (B_hbm eta_hbm)``, with the element-wise bytes ``Q``
of :func:`elementwise_bytes_per_token`. :func:`mfu_frontier` is the best published MFU per GPU and
precision, with its source.
"""

from __future__ import annotations

from functools import lru_cache

from commcost.core.errors import InputError
from commcost.hardware import load_preset_file
from commcost.hardware import lookup

__all__ = ["PRECISIONS", "HBM_EFFICIENCY", "precision_class", "peak_flops_per_s", "elementwise_bytes_per_token", "elementwise_layer_bytes_per_token", "elementwise_time_s",
           "mfu_frontier"]

PRECISIONS = ("bf16", "fp16", "fp8", "mxfp8", "nvfp4")
"""``--precision`` values: the GEMM input format of the transformer layers."""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.workload.transformer import TransformerSpec

_CLASS = {"bf16": "bf16", "fp16": "bf16", "fp8": "fp8", "mxfp8": "fp8", "nvfp4": "fp4"}


@lru_cache(maxsize=1)
def _table() -> dict:
    """compute.json, parsed once (read-only: callers never mutate it)."""
    return load_preset_file("compute.json")


def precision_class(precision: str) -> str:
    """``bf16`` (bf16, fp16), ``fp8`` (fp8, mxfp8) or ``fp4`` (nvfp4)."""
    try:
        return _CLASS[precision]
    except KeyError:
        raise InputError(f"unknown precision {precision!r} (valid: {', '.join(PRECISIONS)})") from None


def peak_flops_per_s(gpu: str, precision: str) -> float:
    """Dense tensor-core peak of GPU preset ``gpu`` at ``precision``, FLOP/s."""
    row = lookup(_table()["peak_flops_per_s"], gpu, "GPU (compute.json)")
    cls = precision_class(precision)
    if cls not in row:
        have = ", ".join(k for k in row if k != "source")
        raise InputError(f"{gpu} has no {precision} tensor cores (it has: {have})")
    return float(row[cls])


HBM_EFFICIENCY = 0.8
"""eta_hbm: the share of HBM peak bandwidth element-wise kernels reach (assumed; stream-copy class
kernels reach 80-90% on A100/H100)."""


def elementwise_bytes_per_token(*, hidden: float, ffn_width: float, gated: bool, q_width: float, kv_width: float,
                                heads: float, seq: float, tp: float, sp: bool, dropout: bool, flash: bool,
                                rotary: bool, top_k: float = 0.0) -> float:
    """Forward HBM bytes per token of one layer's element-wise kernels (2-byte elements), split as the
    tensors are: norms (read + write, twice: ``4h``), residual adds (two reads and a write, twice: ``6h``),
    dropout (read, write and a 1-byte mask, twice: ``5h``, with dropout) over ``r = t`` with sequence
    parallelism else 1; the activation (``2 f`` plain, ``3 f`` gated, ``f = k f_e`` for experts) and
    rotary embeddings on Q and K (``2 (w_q + w_kv)``) over t; MoE token permutation (copy in and
    out for dispatch and combine, ``4 k h``) over r; without flash attention the softmax and its
    dropout over the ``n_q s`` scores of a token (``(2 + 2.5) n_q s``) over t."""
    r = tp if sp else 1.0
    rep = (10.0 + 5.0 * dropout) * hidden + 4.0 * top_k * hidden
    split = (3.0 if gated else 2.0) * ffn_width + 2.0 * (q_width + kv_width) * rotary
    scores = (2.0 + 2.5 * dropout) * heads * seq * (not flash)
    return 2.0 * (rep / r + (split + scores) / tp)


def elementwise_layer_bytes_per_token(spec: TransformerSpec, *, seq: float, tp, sp: bool, flash: bool):
    """``(L_dense Q_dense + L_moe Q_moe) / L``: :func:`elementwise_bytes_per_token` of the model's
    layers mixed in their proportion (an MoE layer's activation over ``k f_e + f_s``); ``tp`` a float
    or a numpy array (``commcost search``)."""
    common = dict(hidden=spec.hidden, gated=spec.gated_mlp, q_width=spec.q_width, kv_width=spec.kv_width,
                  heads=spec.heads, seq=seq, tp=tp, sp=sp, dropout=spec.dropout, flash=flash,
                  rotary=spec.max_positions == 0)
    dense = elementwise_bytes_per_token(ffn_width=spec.ffn, **common)
    moe = elementwise_bytes_per_token(ffn_width=spec.top_k * spec.expert_ffn + spec.shared_ffn,
                                      top_k=spec.top_k, **common) if spec.is_moe else 0.0
    return (spec.dense_layer_count * dense + spec.moe_layer_count * moe) / spec.layers


def elementwise_time_s(*, tokens, layers, bytes_per_token_layer, passes, hbm_bytes_per_s: float):
    """``Q_mb / (B_hbm eta_hbm)``, ``Q_mb = (b s / c) (L/p) Q_layer x passes`` (forward once, backward
    twice, full recomputation once more: 3 or 4). Array-safe."""
    return tokens * layers * bytes_per_token_layer * passes / (hbm_bytes_per_s * HBM_EFFICIENCY)


def mfu_frontier(gpu: str, precision: str) -> tuple[float, str] | None:
    """``(best published MFU, its source)`` for GPU preset ``gpu`` at ``precision``'s class, or None
    when compute.json holds no record (``frontier_mfu``)."""
    row = _table().get("frontier_mfu", {}).get(gpu, {})
    cls = precision_class(precision)
    return (float(row[cls]), row["source"]) if cls in row else None
