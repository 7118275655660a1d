"""Direct tests of ``workload/compute.py``: peaks per precision from the datasheets, the published MFU
frontier, and the element-wise HBM bytes and time of the one-rate compute model, by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commcost.core.errors import InputError
from commcost.workload.compute import (HBM_EFFICIENCY, PRECISIONS, elementwise_bytes_per_token,
                                       elementwise_layer_bytes_per_token, elementwise_time_s, mfu_frontier,
                                       peak_flops_per_s, precision_class)
from commcost.workload.transformer import model_spec

# llama2-7b's layer: h = 4096, f = 11008 (SwiGLU), 32 heads of 128, no GQA, rotary, no dropout
LLAMA = dict(hidden=4096, ffn_width=11008, gated=True, q_width=4096, kv_width=4096, heads=32, seq=4096)


@pytest.mark.parametrize("precision, cls", [("bf16", "bf16"), ("fp16", "bf16"), ("fp8", "fp8"), ("mxfp8", "fp8"),
                                            ("nvfp4", "fp4")])
def test_precision_classes(precision, cls):
    assert precision in PRECISIONS and precision_class(precision) == cls


def test_peaks_are_the_datasheets_dense_numbers():
    # H100 SXM5 datasheet: 1,979 TFLOPS bf16 and 3,958 fp8 *with sparsity*; dense is half, 989.5 and
    # 1,979 TFLOPS to the datasheet's four digits (the usual dense figure is 989.4)
    assert peak_flops_per_s("h100-sxm", "bf16") == pytest.approx(1979e12 / 2, rel=1e-3)
    assert peak_flops_per_s("h100-sxm", "fp16") == peak_flops_per_s("h100-sxm", "bf16")
    assert peak_flops_per_s("h100-sxm", "mxfp8") == pytest.approx(3958e12 / 2, rel=1e-3)


def test_a_precision_the_gpu_lacks_names_what_it_has():
    with pytest.raises(InputError, match=r"h100-sxm has no nvfp4 tensor cores \(it has: bf16, fp8\)"):
        peak_flops_per_s("h100-sxm", "nvfp4")
    with pytest.raises(InputError, match=r"unknown precision 'int4' \(valid: bf16, fp16, fp8, mxfp8, nvfp4\)"):
        precision_class("int4")
    with pytest.raises(InputError, match="unknown GPU"):
        peak_flops_per_s("h1000", "bf16")


def test_mfu_frontier_cites_its_source():
    # Megatron-LM README: "up to 47% MFU on H100" (bf16)
    mfu, source = mfu_frontier("h100-sxm", "bf16")
    assert mfu == 0.47 and "Megatron-LM" in source
    assert mfu_frontier("h100-sxm", "nvfp4") is None  # no record for fp4 on an H100


def test_elementwise_bytes_of_a_llama_layer_by_hand():
    # replicated: 10 h = 40,960 (norms 4h + residual adds 6h), no dropout, no experts
    # split by t: gated activation 3 f = 33,024; rotary on Q and K 2 (w_q + w_kv) = 2 * 8,192 = 16,384
    # 2-byte elements: 2 * (40,960 + 33,024 + 16,384) = 2 * 90,368 = 180,736 B per token
    q = elementwise_bytes_per_token(**LLAMA, tp=1, sp=False, dropout=False, flash=True, rotary=True)
    assert q == 180_736
    # tp = 2 with sequence parallelism halves both parts: 90,368
    assert elementwise_bytes_per_token(**LLAMA, tp=2, sp=True, dropout=False, flash=True, rotary=True) == 90_368
    # tp = 2 without it: 2 * (40,960 + 49,408 / 2) = 2 * 65,664 = 131,328
    assert elementwise_bytes_per_token(**LLAMA, tp=2, sp=False, dropout=False, flash=True, rotary=True) == 131_328


def test_elementwise_bytes_without_flash_attention_by_hand():
    # dropout: replicated 15 h = 61,440; scores (2 + 2.5) n_q s = 4.5 * 32 * 4096 = 589,824;
    # 2 * (61,440 + 49,408 + 589,824) = 2 * 700,672 = 1,401,344 B per token
    q = elementwise_bytes_per_token(**LLAMA, tp=1, sp=False, dropout=True, flash=False, rotary=True)
    assert q == 1_401_344


def test_moe_permutation_bytes_by_hand():
    # top_k = 2 adds 4 k h = 32,768 replicated bytes: 2 * (40,960 + 32,768 + 49,408) = 246,272
    q = elementwise_bytes_per_token(**LLAMA, tp=1, sp=False, dropout=False, flash=True, rotary=True, top_k=2)
    assert q == 246_272


def test_layer_mix_of_a_dense_and_an_moe_model_by_hand():
    # llama2-7b: every layer dense, rotary (no learned positions): 180,736 as above
    assert elementwise_layer_bytes_per_token(model_spec("llama2-7b"), seq=4096, tp=1, sp=False, flash=True) == 180_736
    # mixtral-8x7b: h = 4096, f_e = 14,336, k = 2, 32 heads and 8 KV heads of 128 (w_kv = 1,024), every layer MoE:
    # 2 * (10 h + 4 k h + 3 k f_e + 2 (w_q + w_kv)) = 2 * (40,960 + 32,768 + 86,016 + 10,240) = 339,968
    spec = model_spec("mixtral-8x7b")
    assert (spec.hidden, spec.expert_ffn, spec.top_k, spec.kv_width, spec.moe_layer_count) == (4096, 14336, 2, 1024, 32)
    assert elementwise_layer_bytes_per_token(spec, seq=4096, tp=1, sp=False, flash=True) == 339_968


def test_elementwise_time_by_hand():
    # 4,096 tokens x 32 layers x 180,736 B x 3 passes = 71,068,286,976 B at 3.35e12 B/s x 0.8 = 2.68e12 B/s
    assert HBM_EFFICIENCY == 0.8
    t = elementwise_time_s(tokens=4096, layers=32, bytes_per_token_layer=180_736, passes=3, hbm_bytes_per_s=3.35e12)
    assert t == pytest.approx(71_068_286_976 / 2.68e12)  # 26.52 ms


@given(st.integers(1, 64), st.booleans(), st.booleans(), st.booleans())
def test_more_tensor_parallelism_never_adds_bytes(tp, sp, dropout, flash):
    one = elementwise_bytes_per_token(**LLAMA, tp=1, sp=sp, dropout=dropout, flash=flash, rotary=True)
    many = elementwise_bytes_per_token(**LLAMA, tp=tp, sp=sp, dropout=dropout, flash=flash, rotary=True)
    assert many <= one
    if sp:  # with sequence parallelism every term is split: exactly 1/t
        assert many == pytest.approx(one / tp)
