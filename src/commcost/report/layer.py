"""Text and JSON renderings of :class:`commcost.analyses.drill.layer.LayerRatio`."""

from __future__ import annotations

from commcost.core.units import TERA, format_fraction as pct, format_mb_mib, format_seconds as t

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: the drill without --layer-ratio never loads the layer model
    from commcost.analyses.drill.layer import LayerRatio

__all__ = ["render_layer_text", "layer_to_dict"]



def render_layer_text(r: LayerRatio, *, gpus: int, hidden: int, seq: int,
                      achieved_flops_per_s: float, backward_fraction: float, grad_accum: int = 1) -> str:
    """The ``--layer-ratio`` section."""
    T = r.allreduce
    if grad_accum == 1:
        window_text = (f"backward W_l = f_b * compute = {backward_fraction:.3g} * {t(r.compute_s)} "
                       f"= {t(r.backward_window_s)}")
    else:
        window_text = (f"last micro-batch's backward W_l = f_b * compute / k = {backward_fraction:.3g} * "
                       f"{t(r.compute_s)} / {grad_accum} = {t(r.backward_window_s)} (no_sync: the earlier "
                       "micro-batches' backward passes cannot overlap it)")
    return "\n".join([
        f"layer ratio: one transformer layer, h = {hidden}, s = {seq}, P = {gpus}, "
        f"F = {achieved_flops_per_s / TERA:g} TFLOP/s achieved per GPU",
        f"    parameters       N_l = 12h^2                = {r.params:,}",
        f"    gradient         S_l = N_l * bytes          = {r.grad_bytes:,.0f} B = {format_mb_mib(r.grad_bytes)}",
        f"    tokens per rank  D = micro_batch*seq*k      = {r.tokens_per_rank:,} per optimizer step",
        f"    all-reduce       2(P-1)a + 2(P-1)/P*S_l/B  = {t(T.latency_s)} + {t(T.bandwidth_s)} = {t(T.total_s)}",
        f"    compute          (6 N_l D + 12 h s D) / F   = ({r.dense_flops:.3e} + {r.attention_flops:.3e}) FLOP"
        f" / F = {t(r.compute_s)}",
        f"    comm / compute   = {r.comm_to_compute:.3f}",
        f"    verdict          {r.verdict}: all-reduce {'<=' if r.verdict == 'HIDES' else '>'} "
        f"{window_text}",
        f"    exposed          max(0, T_l - W_l)          = {t(r.exposed_lower_bound_s)} at least, per optimizer step"
        f" ({pct(r.exposed_lower_bound_s / r.compute_s)} of compute)",
        f"    width-free form  2(P-1)/P * bytes * F / (6 D B) = {r.width_free_ratio:.3f}: h cancels; "
        "the ratio is set by tokens per rank per optimizer step",
        f"    tokens per rank per micro-batch to hide it  D*_mb = T_l F / (f_b (72h^2 + 12hs)) = "
        f"{r.tokens_to_hide:,.0f} ({r.tokens_to_hide / seq:.2f} sequences of {seq})",
    ])


def layer_to_dict(r: LayerRatio) -> dict[str, object]:
    """``layer.*`` keys of the JSON schema."""
    return {
        "params": r.params, "grad_bytes": r.grad_bytes, "tokens_per_rank": r.tokens_per_rank,
        "comm_s": r.allreduce.total_s, "comm_latency_s": r.allreduce.latency_s,
        "comm_bandwidth_s": r.allreduce.bandwidth_s,
        "dense_flops": r.dense_flops, "attention_flops": r.attention_flops,
        "compute_s": r.compute_s, "comm_to_compute": r.comm_to_compute,
        "width_free_ratio": r.width_free_ratio, "tokens_to_hide": r.tokens_to_hide,
        "backward_window_s": r.backward_window_s, "exposed_lower_bound_s": r.exposed_lower_bound_s,
        "verdict": r.verdict,
    }
