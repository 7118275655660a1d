"""What a model puts on the wire and on the chip: gradient bytes, layer sizes, FLOPs.

Symbols: ``N`` parameters, ``h`` hidden size, ``s`` sequence length, ``D``
tokens processed per rank per optimizer step.

* gradient message ``S = N * bytes_per_grad``
* parameters of one transformer layer ``12 h^2`` (attention 4h^2: Q, K, V, O;
  MLP 8h^2 with the 4h intermediate; biases and norms ignored) -- Kaplan et al.
  2020, Table 1; nanoGPT ``transformer_sizing.ipynb``.
* training FLOPs of one layer for ``D`` tokens ``6 * 12h^2 * D + 12 * h * s * D``:
  the dense part is 2 FLOPs per parameter per token forward and 4 backward; the
  second is attention's score and value products (``QK^T`` and ``AV``:
  ``2 * 2 * s * h`` forward per token, times 3 for forward plus backward), as in
  nanoGPT's ``flops_per_token = 6N + 12 L H Q T``.
"""

from __future__ import annotations

from dataclasses import dataclass

from commcost.core.errors import InputError
from commcost.core.validation import require_count

__all__ = [
    "BYTES_PER_ELEMENT", "bytes_per_element", "gradient_bytes",
    "transformer_layer_params", "transformer_layer_train_flops",
]

from commcost.core.dtypes import BYTES_PER_ELEMENT, bytes_per_element, gradient_bytes  # noqa: E402,F401 (re-exported)


def transformer_layer_params(hidden: int) -> int:
    """Parameters of one transformer layer, ``12 h^2``."""
    return 12 * hidden * hidden


def transformer_layer_train_flops(hidden: int, seq: int, tokens: float) -> tuple[float, float]:
    """Training FLOPs of one layer for ``tokens`` tokens: ``(dense, attention)``.

    dense ``= 6 * 12h^2 * D``; attention ``= 12 * h * s * D``.
    """
    dense = 6.0 * transformer_layer_params(hidden) * tokens
    attention = 12.0 * hidden * seq * tokens
    return dense, attention


# --- Per-layer gradients and backward compute (the DDP timeline) ------------------
#
# A decoder-only transformer (:class:`commcost.workload.transformer.TransformerSpec`, the one shape class
# of every command), layer by layer, for the bucket timeline. Symbols: ``L`` layers, ``h`` hidden, ``f``
# MLP inner size, ``V`` vocabulary, ``s`` sequence length (carried beside the spec:
# ``TimelineInputs.seq``), ``n_q``/``n_kv`` query/key-value heads (grouped-query attention when
# ``n_kv < n_q``).
#
# * parameter tensors of one layer, in forward order: [ln_1], Q, K, V (K and V
#   ``h * h n_kv/n_q`` each), O, [ln_2], MLP up (and gate when gated), MLP down;
#   plus biases when the model has them (GPT-2). ``f = 4h`` and no gating give
#   the textbook ``12 h^2``.
# * embedding ``V h`` (plus ``s_max h`` learned positions), final norm, and an
#   output head ``V h`` unless tied to the embedding.
# * backward FLOPs per token: a matrix with ``n`` parameters costs ``4 n``
#   (the two backward GEMMs of the ``6N`` rule); attention's score and value
#   products ``8 h s`` per layer (two thirds of nanoGPT's ``12 h s``); norms,
#   biases and the embedding look-up ~0 (element-wise / a scatter-add).
#
# This module never imports :mod:`commcost.workload.transformer` (nor the registry) at its top: the
# drill's ``--layer-ratio`` loads it for the formulas above, and its start-up loads no model classes.

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from commcost.workload.transformer import TransformerSpec

__all__ += ["GradientLayer", "transformer_gradient_layers", "model_params", "check_timeline_shape",
            "MAX_LAYERS", "MAX_MODEL_PARAMS"]

MAX_LAYERS = 10_000
"""Most transformer layers the timeline lays out (the deepest published models have a few hundred); it
builds one object per layer, so 10**10 layers would take minutes and gigabytes."""
MAX_MODEL_PARAMS = 1e15
"""Most parameters the timeline models (a thousand times the largest published dense models), as
``--params`` allows at most 10**6 billion."""


def fits_timeline(spec: TransformerSpec) -> bool:
    """True when the timeline lays ``spec`` out exactly: a dense model (no experts) whose attention
    is the Q K V O formula with heads of width ``h / n_q`` and no QK-norm. The rest (mixture-of-experts,
    multi-latent attention, QK-norm, heads wider than ``h/n_q``) are for ``commcost plan``. The
    ``"timeline"`` flag of ``models.json`` says the same for each row (a test holds them equal)."""
    return (not spec.is_moe and not spec.qk_norm and not spec.attention_params and not spec.is_mla
            and not spec.window_layers and not spec.extra_layer_params
            and spec.d * spec.heads == spec.hidden and spec.d_qk == spec.d)


def _refuse_unfit(spec: TransformerSpec, name: str) -> None:
    if not fits_timeline(spec):
        raise InputError(f"model {name!r} is not a plain dense transformer the DDP timeline can lay out "
                         f"(mixture-of-experts or a non-standard attention); use commcost plan --model {name}")


def check_timeline_shape(spec: TransformerSpec, seq: int) -> None:
    """Refuse what the timeline cannot lay out, before anything builds the per-layer model: a spec
    :func:`fits_timeline` rejects, a sequence length under 1, more than :data:`MAX_LAYERS` layers or more
    than :data:`MAX_MODEL_PARAMS` parameters (:func:`model_params`, O(1) in ``L``)."""
    _refuse_unfit(spec, spec.name)
    require_count("seq", seq)
    if spec.layers > MAX_LAYERS:
        raise InputError(f"layers must be at most {MAX_LAYERS:,}, got {spec.layers:,}" if spec.layers < 10**30
                         else f"layers must be at most {MAX_LAYERS:,}, got an integer of "
                              f"{len(str(spec.layers))} digits")
    n = model_params(spec)
    if n > MAX_MODEL_PARAMS:
        raise InputError(f"the shape L = {spec.layers:,}, h = {spec.hidden:.4g}, s = {seq:.4g}, "
                         f"V = {spec.vocab:.4g} has {float(n):.3g} parameters; at most {MAX_MODEL_PARAMS:.0e} "
                         "are modelled")


@dataclass(frozen=True, slots=True, kw_only=True)
class GradientLayer:
    """One layer's parameter tensors and backward compute, as the timeline sees them."""

    name: str
    """``"embedding"``, ``"layer 0"`` ... ``"layer L-1"``, ``"final norm"``, ``"output head"``."""
    tensor_params: tuple[int, ...]
    """Elements of each parameter tensor, in forward order (gradients arrive in reverse)."""
    backward_flops_per_token: float
    """Backward FLOPs of this layer per token."""

    @property
    def params(self) -> int:
        """Parameters of the layer (sum of its tensors)."""
        return sum(self.tensor_params)


def _layer_tensors(m: TransformerSpec) -> tuple[int, ...]:
    h, f, kv = m.hidden, m.ffn, m.kv_width
    norm = (h, h) if m.biases else (h,)
    out: list[int] = [*norm]
    for width in (h, kv, kv):                       # Q, K, V
        out += [h * width] + ([width] if m.biases else [])
    out += [h * h] + ([h] if m.biases else [])      # O
    out += norm
    for _ in range(2 if m.gated_mlp else 1):        # up (and gate)
        out += [h * f] + ([f] if m.biases else [])
    out += [f * h] + ([h] if m.biases else [])      # down
    return tuple(out)


def transformer_gradient_layers(m: TransformerSpec, seq: int) -> tuple[GradientLayer, ...]:
    """The layers of ``m`` trained at sequence length ``seq``, in forward order, embedding first (see the
    comment above). ``m`` must fit the timeline (:func:`check_timeline_shape`)."""
    h, s, V = m.hidden, seq, m.vocab
    embedding = (V * h,) + ((m.max_positions * h,) if m.max_positions else ())
    layers = [GradientLayer(name="embedding", tensor_params=embedding, backward_flops_per_token=0.0)]
    tensors = _layer_tensors(m)
    matrix_params = 2 * h * h + 2 * h * m.kv_width + (3 if m.gated_mlp else 2) * h * m.ffn
    for i in range(m.layers):
        layers.append(GradientLayer(name=f"layer {i}", tensor_params=tensors,
                                    backward_flops_per_token=4.0 * matrix_params + 8.0 * h * s))
    layers.append(GradientLayer(name="final norm", tensor_params=(h, h) if m.biases else (h,),
                                backward_flops_per_token=0.0))
    head = () if m.tied_embeddings else (V * h,)
    layers.append(GradientLayer(name="output head", tensor_params=head,
                                backward_flops_per_token=4.0 * V * h))
    return tuple(layers)


def model_params(m: TransformerSpec) -> int:
    """Total parameters N as the timeline lays ``m`` out (each tensor counted once; a tied head adds none):
    the sum over :func:`transformer_gradient_layers`, in closed form (the L layers are alike), so O(1) in L:
    ``N = V h [+ s_max h] + L * sum(layer tensors) + final norm + [V h]``. Equal to ``m.params`` for every
    registry model the timeline takes (tests/workload/test_shape_spec.py)."""
    from commcost.workload.transformer import TransformerSpec

    if not isinstance(m, TransformerSpec):
        raise TypeError(f"m must be a TransformerSpec, got {type(m).__name__}")
    h, V = m.hidden, m.vocab
    embedding = V * h + m.max_positions * h
    final_norm = 2 * h if m.biases else h
    head = 0 if m.tied_embeddings else V * h
    return embedding + m.layers * sum(_layer_tensors(m)) + final_norm + head


def model_preset_names() -> tuple[str, ...]:
    """Names of the model presets in ``hardware/models.json`` the timeline lays out exactly
    (:func:`fits_timeline`; the rest are for ``commcost plan``)."""
    from commcost.hardware.registry import models  # lazy: not on the drill's path
    from commcost.workload.transformer import spec_from_row
    return tuple(k for k, row in models().items() if fits_timeline(spec_from_row(k, row)))


def model_preset(name: str) -> tuple[TransformerSpec, int]:
    """``(spec, seq)``: the :class:`~commcost.workload.transformer.TransformerSpec` of preset ``name`` (exact
    key or an alias of :data:`commcost.hardware.registry.MODEL_ALIASES`; unknown names list the valid ones)
    and its training sequence length ``seq_tokens``, as the timeline takes them (``TimelineInputs(shape=spec,
    seq=seq, ...)``). Refuses a model :func:`fits_timeline` rejects, naming it as given."""
    from commcost.hardware.registry import model_key, model_row  # lazy: not on the drill's path
    from commcost.workload.transformer import spec_from_row
    row = model_row(name, "model preset")
    spec = spec_from_row(model_key(name), row)
    _refuse_unfit(spec, name)
    return spec, row["seq_tokens"]


__all__ += ["fits_timeline", "model_preset", "model_preset_names"]
