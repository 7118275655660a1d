"""Direct tests of ``analyses/scaling_seed.py``: the seed's presets in SI, and its model keys are the
model registry's aliases (one name per model across the seed and the registry)."""

from __future__ import annotations

import pytest

from commcost.hardware.registry import MODEL_ALIASES, models
from commcost.analyses.scaling_seed import seed_defaults, seed_fabrics, seed_models, seed_two_tier


def test_models_in_si():
    m = seed_models()
    # the seed's rounded sizes (1e9 per billion) and its compute times in ms -> s
    assert (m["125m"].params, m["1.3b"].params, m["7b"].params) == (125e6, 1.3e9, 7e9)
    assert (m["125m"].compute_s, m["1.3b"].compute_s, m["7b"].compute_s) == pytest.approx((3e-3, 50e-3, 0.4))
    assert all(p.source for p in m.values())


def test_seed_models_are_the_registry_aliases():
    # every seed model name is an alias of a registry model of about the seed's size: GPT-2 small 124.4e6 vs
    # 125e6 (0.4%), GPT-2 XL 1,557.6e6 vs 1.3e9 (the seed's "1.3B equiv": 20% apart), Llama-2 7B 6.74e9 vs 7e9 (3.7%)
    m = seed_models()
    assert set(m) == set(MODEL_ALIASES)
    for key, preset in m.items():
        published = models()[MODEL_ALIASES[key]]["params"]
        assert abs(published - preset.params) / preset.params < 0.25, key


def test_fabrics_in_si():
    f = seed_fabrics()
    # NVLink 600 GB/s and 0.02 ms per ring step; InfiniBand 25 GB/s and 0.05 ms
    assert (f["nvlink"].link.bandwidth_bytes_per_s, f["nvlink"].link.latency_s) == pytest.approx((600e9, 20e-6))
    assert (f["infiniband"].link.bandwidth_bytes_per_s, f["infiniband"].link.latency_s) == pytest.approx((25e9, 50e-6))
    assert f["nvlink"].flat_ring_max_gpus == 8 and f["infiniband"].flat_ring_max_gpus is None


def test_defaults_and_two_tiers():
    d = seed_defaults()
    assert d.bytes_per_grad == 2 and d.overhead_s == pytest.approx(0.5e-3) and d.overlap_fraction == 0.85
    assert d.gpu_counts == (1, 2, 4, 8, 16, 32, 64, 128)
    # 64 GPUs on 8-GPU nodes: ceil(64 / 8) = 8 nodes, NVLink inside, InfiniBand across
    t = seed_two_tier(8, 64)
    assert (t.gpus_per_node, t.nodes) == (8, 8)
    assert t.intra == seed_fabrics()["nvlink"].link and t.inter == seed_fabrics()["infiniband"].link
    assert seed_two_tier(8, 65).nodes == 9
