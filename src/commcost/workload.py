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

from commcost.errors import InputError

__all__ = [
    "BYTES_PER_ELEMENT", "bytes_per_element", "gradient_bytes",
    "transformer_layer_params", "transformer_layer_train_flops",
]

BYTES_PER_ELEMENT: dict[str, int] = {
    "fp32": 4,
    "tf32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
}
"""Bytes per gradient element for each dtype name accepted by ``--dtype``."""


def bytes_per_element(dtype: str) -> int:
    """Bytes per element of ``dtype`` (``"bf16"`` -> 2); unknown names list the valid ones."""
    try:
        return BYTES_PER_ELEMENT[dtype]
    except KeyError:
        valid = ", ".join(BYTES_PER_ELEMENT)
        raise InputError(f"unknown dtype {dtype!r} (valid: {valid})") from None


def gradient_bytes(params: float, bytes_per_grad: int) -> float:
    """Gradient all-reduce message ``S = N * bytes_per_grad``, bytes."""
    return params * bytes_per_grad


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
