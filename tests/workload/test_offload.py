"""Activation offloading (commcost.workload.offload): Megatron-Core's rules, the resident layers, the copies'
exposed time, the host link of gpus.json, and the memory it saves (values by hand)."""

from __future__ import annotations

import pytest

from commcost.core.errors import InputError
from commcost.core.xp import SCALAR
from commcost.parallel.layout import Layout
from commcost.workload.memory import memory_per_gpu
from commcost.workload.offload import check_cpu_offload, host_link_bytes_per_s, offload_exposed_s, resident_layers
from commcost.workload.stacks import stack
from commcost.workload.transformer import model_spec


def test_rules_are_megatron_cores():
    check_cpu_offload(0, layers=80, pp=4, recompute="full")        # nothing offloaded: no rule applies
    check_cpu_offload(79, layers=80, pp=1, recompute="none")
    for n, pp, rc, words in ((80, 1, "none", "at most 79"), (-1, 1, "none", ">= 0"), (40, 2, "none", "pipeline"),
                             (40, 1, "selective", "recomputation"), (True, 1, "none", "whole number")):
        with pytest.raises(InputError, match=words):
            check_cpu_offload(n, layers=80, pp=pp, recompute=rc)


def test_resident_layers():
    # Transformer Engine's schedule: L - N layers' worth on the GPU at the peak; 80 - 40 = 40
    assert resident_layers(80, 40) == 40


def test_exposed_copy_time_by_hand():
    # Q = 90 GB over 450 GB/s = 0.2 s each way; forward 0.1 s hides 0.1 of it, backward 0.3 s all of it
    assert offload_exposed_s(SCALAR, offloaded_bytes=90e9, host_bytes_per_s=450e9, forward_s=0.1,
                             backward_s=0.3) == pytest.approx(0.1)
    # PCIe Gen5: 64 GB/s; 128 GB take 2 s each way; 0.5 s forward, 1.5 s backward: 1.5 + 0.5 = 2.0 s exposed
    assert offload_exposed_s(SCALAR, offloaded_bytes=128e9, host_bytes_per_s=64e9, forward_s=0.5,
                             backward_s=1.5) == pytest.approx(2.0)
    assert offload_exposed_s(SCALAR, offloaded_bytes=0.0, host_bytes_per_s=64e9, forward_s=0.5, backward_s=1.5) == 0


def test_host_links():
    assert host_link_bytes_per_s("gb200") == 450e9      # NVLink-C2C, 900 GB/s both ways
    assert host_link_bytes_per_s("h100-sxm") == 64e9    # PCIe Gen5 x16
    assert host_link_bytes_per_s("a100-sxm4-80gb") == 32e9
    with pytest.raises(InputError, match="host link"):
        host_link_bytes_per_s("b300")


def test_memory_of_the_gb200_llama3_70b_recipe_by_hand():
    # Llama 3 70B, s = 8192, b = 2 (sb = 16,384), h 8192, 64 query and 8 KV heads of 128, f 28,672, t = 1,
    # flash, no dropout, Megatron-Core fp8 (inputs saved in fp8: q_in = 1; fused SwiGLU keeps 4 bytes per f):
    #   replicated (4 + 2 q_in) h = 6 x 8192 = 49,152; attention 2 (64 + 8) 128 + 2 x 8 x 128 + (2 + 1) 64 x 128
    #   = 45,056 (O's input in fp8 and flash attention's saved bf16 output); MLP (4 + 1) 28,672 = 143,360;
    #   log-sum-exp 4 x 64 = 256: 237,824 bytes per token,
    #   A = 16,384 x 237,824 = 3,896,508,416 bytes a layer; 40 layers offloaded: 155,860,336,640 bytes
    spec = model_spec("llama3-70b")
    L = Layout(dp=64, tp=1, pp=1, zero=3, micro_batch=2, global_batch=256)
    kw = dict(seq=8192, capacity_bytes=185 * 2**30, stack=stack("nemo"), fp8=True)
    whole = memory_per_gpu(spec, L, **kw)
    half = memory_per_gpu(spec, L, **kw, offloaded_layers=40)
    assert half.offloaded_bytes == pytest.approx(155_860_336_640, rel=1e-12)
    assert whole.activations_bytes - half.activations_bytes == pytest.approx(155_860_336_640, rel=1e-12)
    assert (whole.in_flight_layers, half.in_flight_layers) == (80, 40)
    assert whole.verdict == "does not fit" and half.verdict != "does not fit"


def test_deepspeed_zero3_buffers_are_bounded_by_hand():
    # GPT-3 530B shapes (h 20,480, f 4h, 128 heads, V 51,200), t = 1: a layer holds 12 h^2 = 5,033,164,800
    # parameters; the largest matrix is h x 4h = 1,677,721,600 (> V h = 1,048,576,000).
    # Without a bound: 2 layers' fp16 weights + one layer's fp16 gradients = 3 x 2 x 5,033,164,800 = 30,198,988,800 B.
    # DeepSpeed (M = 1e9 live, R = 5e8 bucket): min(2 N, max(M, N_max)) = 1,677,721,600 weights and
    # min(N, max(R, N_max)) = 1,677,721,600 gradients, 2 bytes each: 6,710,886,400 B.
    from commcost.core.xp import SCALAR as xp
    from commcost.workload.memory import buffer_bytes, largest_matrix_params

    spec = model_spec("megatron-gpt-529.6b")
    assert largest_matrix_params(spec, 1) == 1_677_721_600
    kw = dict(pp=1, micro_batch=1, seq_local=2048, hidden=20480, tp=1, zero3=True, layer_params=5_033_164_800,
              sequence_parallel=False)
    assert buffer_bytes(xp, **kw) == 30_198_988_800
    assert buffer_bytes(xp, **kw, live_params=1e9, reduce_bucket_params=5e8,
                        largest_params=1_677_721_600) == 6_710_886_400
    # a small layer (Llama 3 8B: 218,112,000 per layer) stays under both bounds: unchanged
    small = dict(kw, layer_params=218_112_000)
    assert buffer_bytes(xp, **small, live_params=1e9, reduce_bucket_params=5e8, largest_params=525_336_576) \
        == buffer_bytes(xp, **small) == 6 * 218_112_000
