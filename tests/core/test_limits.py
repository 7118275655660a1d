"""The library's bounds (commcost.core.limits) refuse at its edge what the CLI refuses, with the
argument named: never inf, a negative size, an AttributeError or unbounded work (issue 36 item 10)."""

from __future__ import annotations

import pytest

from commcost import (Collective, FlatLinkModel, Layout, Link, Sample, TimelineInputs, fit_alpha_beta,
                      memory_per_gpu, model_spec, ring_all_reduce, sweep_buckets, system_group)
from commcost.core import limits
from commcost.core.errors import InputError


def test_a_link_below_one_kilobyte_per_second_is_refused():
    # at 6a178e4 5e-324 B/s was accepted and a 1 MB all-reduce cost inf seconds
    with pytest.raises(InputError, match=r"bandwidth_bytes_per_s must be at least 1000 \(1 kB/s\)"):
        Link(bandwidth_bytes_per_s=5e-324, latency_s=0.0)
    with pytest.raises(InputError, match="bandwidth_bytes_per_s must be at most 1e"):
        Link(bandwidth_bytes_per_s=1e300, latency_s=0.0)
    with pytest.raises(InputError, match="latency_s must be at most 10"):
        Link(bandwidth_bytes_per_s=1e9, latency_s=1e6)
    # the slowest link and the largest message stay finite: 2 (P-1)/P S/B <= 2 * 2**60 / 1e3 = 2.3e15 s
    c = ring_all_reduce(2.0**60, 2, Link(bandwidth_bytes_per_s=1e3, latency_s=10.0))
    assert c.bandwidth_s == pytest.approx(2.0**60 / 1e3) and c.latency_s == 2 * 10.0


def test_a_string_where_a_link_is_expected_is_a_type_error():
    # at 6a178e4: AttributeError: 'str' object has no attribute 'latency_s'
    with pytest.raises(TypeError, match="link must be a commcost.Link, got str"):
        ring_all_reduce(1e6, 8, "25GB/s")
    with pytest.raises(TypeError, match="spec must be a TransformerSpec, got str"):
        memory_per_gpu("llama2-7b", Layout(dp=8, global_batch=8), seq=4096, capacity_bytes=80e9)


def test_memory_refuses_a_negative_sequence():
    # at 6a178e4 seq=-1 gave negative activation bytes
    with pytest.raises(InputError, match="seq must be an integer >= 1, got -1"):
        memory_per_gpu(model_spec("llama2-7b"), Layout(dp=8, global_batch=8), seq=-1, capacity_bytes=80e9)


def test_counts_past_the_bounds_are_refused():
    with pytest.raises(InputError, match="nodes must be at most 1,000,000, got 1,000,000,000"):
        system_group("dgx-h100", nodes=10**9)
    with pytest.raises(InputError, match="global_batch must be at most 10,000,000 sequences"):
        Layout(dp=1, global_batch=10**12)
    from commcost.analyses.plan.space import SearchSpace

    with pytest.raises(InputError, match="global_batch must be at most 10,000,000 sequences"):
        SearchSpace(spec=model_spec("llama2-7b"), seq=4096, global_batch=10**12, gpus=(64,), gpus_per_node=8)


def test_a_sweep_of_too_many_caps_and_a_fit_of_too_many_regimes_are_refused():
    inp = TimelineInputs(gpus=8, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6)),
                         step_s=0.1, params=1e9)
    with pytest.raises(InputError, match="at most 10,000 caps are simulated in one sweep, got 200,000"):
        sweep_buckets(inp, tuple(range(2**20, 2**20 + 200_000)))
    # a straight line t = 5 us + S / 10 GB/s at 4 sizes
    samples = [Sample(size_bytes=s, time_s=5e-6 + s / 10e9) for s in (1e3, 1e4, 1e5, 1e6)]
    with pytest.raises(InputError, match="max_regimes must be at most 100, got 1,000,000"):
        fit_alpha_beta(samples, op=Collective.ALL_REDUCE, gpus=8, max_regimes=10**6)


def test_training_cost_is_bounded_as_the_flags_are():
    from commcost.analyses.plan.training_cost import training_cost

    with pytest.raises(InputError, match="tokens must be at most 1e\\+16"):
        training_cost(tokens=1e300, tokens_per_s_per_gpu=1e3, gpus=8)
    with pytest.raises(InputError, match="price_per_gpu_hour must be at most 10000 dollars"):
        training_cost(tokens=1e12, tokens_per_s_per_gpu=1e3, gpus=8, price_per_gpu_hour=1e300)
    # 1e16 tokens at 1e-9 tokens/s/GPU: H = 1e16 / 1e-9 / 3600 = 2.78e21 GPU-hours, finite
    c = training_cost(tokens=1e16, tokens_per_s_per_gpu=1e-9, gpus=1, price_per_gpu_hour=1e4)
    assert c.gpu_hours == pytest.approx(1e25 / 3600) and c.cost == pytest.approx(1e29 / 3600)


def test_the_flags_hold_the_library_bounds():
    from commcost.cli._args import FLAG_BOUNDS

    assert FLAG_BOUNDS["--gpus"][1] == limits.MAX_GPUS
    assert FLAG_BOUNDS["--nodes"][1] <= limits.MAX_NODES  # the typed flag is held tighter
    assert FLAG_BOUNDS["--seq"][1] == limits.MAX_SEQ
    assert FLAG_BOUNDS["--global-batch"][1] == limits.MAX_GLOBAL_BATCH
    assert FLAG_BOUNDS["--train-tokens"][1] == limits.MAX_TRAIN_TOKENS
    assert FLAG_BOUNDS["--price-per-gpu-hour"][1] == limits.MAX_PRICE_PER_GPU_HOUR
    assert FLAG_BOUNDS["--max-regimes"][1] == limits.MAX_REGIMES
