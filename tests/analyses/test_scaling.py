"""commcost.analyses.scaling: the seed's numbers from hand computations, presets, validation, invariants.

Symbols as in the module: S gradient bytes, N GPUs, a per-ring-step latency,
B per-rank bandwidth, t_c compute, t_o serial overhead, f overlap fraction,
T = 2(N-1)a + 2(N-1)/N * S/B.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import assume, given, settings, strategies as st

from commcost.cli._fabric import seed_fabric_models
from commcost.comm.model import FlatLinkModel
from commcost import InputError, Link
from commcost.analyses.scaling import (
    ScalingInputs, data_parallel_comm, scaling_curve, scaling_row, seed_analysis,
    seed_defaults, seed_fabrics, seed_inputs, seed_models,
)

ROOT = Path(__file__).resolve().parents[2]
MS = 1e-3


def _row(curve, n):
    return next(r for r in curve.rows if r.gpus == n)


def _curve(curves, model_prefix, fabric):
    return next(c for c in curves if c.inputs.model.startswith(model_prefix) and c.inputs.fabric == fabric)


# ------------------------------------------------------------------ the seed's results table (t_o = 0.5 ms)

RESULTS, OVERLAP = seed_analysis(seed_fabric_models())


def test_results_cover_three_models_on_two_fabrics_at_n_1_to_128():
    assert [(c.inputs.model, c.inputs.fabric) for c in RESULTS] == [
        ("125M (GPT-2 small)", "NVLink"), ("125M (GPT-2 small)", "InfiniBand"),
        ("1.3B (GPT-2 XL equiv)", "NVLink"), ("1.3B (GPT-2 XL equiv)", "InfiniBand"),
        ("7B (Llama-7B equiv)", "NVLink"), ("7B (Llama-7B equiv)", "InfiniBand"),
    ]
    for c in RESULTS:
        assert [r.gpus for r in c.rows] == [1, 2, 4, 8, 16, 32, 64, 128]
        assert c.inputs.overhead_s == pytest.approx(0.5e-3)


def test_7b_nvlink_n2_comm_and_step():
    # S = 7e9 * 2 B = 14e9 B; bandwidth term 2*(1/2)*14e9/600e9 s = 23.3333 ms;
    # latency term 2*1*0.02 ms = 0.04 ms; T = 23.3733 ms < t_c = 400 ms
    # step = max(400, 23.37) + 0.5 = 400.5 ms; X = 2*400.5/400.5 = 2; E = 1
    r = _row(_curve(RESULTS, "7B", "NVLink"), 2)
    assert r.comm.bandwidth_s == pytest.approx(23.333333e-3, rel=1e-6)
    assert r.comm.latency_s == pytest.approx(0.04e-3, rel=1e-9)
    assert r.comm_s == pytest.approx(23.373333e-3, rel=1e-6)
    assert r.step_s == pytest.approx(400.5e-3)
    assert r.speedup == pytest.approx(2.0)
    assert r.efficiency == pytest.approx(1.0)


def test_125m_nvlink_latency_bound_at_64_and_128():
    # N=64: latency 2*63*0.02 = 2.52 ms; bandwidth 2*(63/64)*250e6/600e9 s = 0.8203125 ms
    # T = 3.3403125 ms > t_c = 3 ms -> step = 3.8403125 ms; X = 64*3.5/3.8403125 = 58.3286
    r64 = _row(_curve(RESULTS, "125M", "NVLink"), 64)
    assert r64.comm_s == pytest.approx(3.3403125e-3, rel=1e-9)
    assert r64.speedup == pytest.approx(64 * 3.5 / 3.8403125, rel=1e-9)
    assert r64.speedup == pytest.approx(58.3286, abs=1e-4)
    assert r64.efficiency == pytest.approx(0.911384, abs=1e-6)
    # N=128: latency 2*127*0.02 = 5.08 ms; bandwidth 2*(127/128)*250e6/600e9 s = 0.8268229 ms
    # T = 5.9068229 ms; step = 6.4068229 ms; X = 128*3.5/6.4068229 = 69.9255; E = 0.546293
    r128 = _row(_curve(RESULTS, "125M", "NVLink"), 128)
    assert r128.comm_s == pytest.approx(5.9068229e-3, rel=1e-7)
    assert r128.speedup == pytest.approx(69.9255, abs=1e-4)
    assert r128.efficiency == pytest.approx(0.546293, abs=1e-6)


def test_125m_infiniband_n2_is_slower_than_one_gpu():
    # T = 2*1*0.05 ms + 2*(1/2)*250e6/25e9 s = 0.1 + 10 = 10.1 ms; step = 10.1 + 0.5 = 10.6 ms
    # X = 2*3.5/10.6 = 0.660377 (< 1: two GPUs are slower than one)
    r = _row(_curve(RESULTS, "125M", "InfiniBand"), 2)
    assert r.step_s == pytest.approx(10.6e-3)
    assert r.speedup == pytest.approx(0.660377, abs=1e-6)
    assert r.efficiency == pytest.approx(0.330189, abs=1e-6)


def test_1p3b_and_7b_infiniband_at_128():
    # 1.3B: T = 2*127*0.05 + 2*(127/128)*2.6e9/25e9 s = 12.7 + 206.375 = 219.075 ms
    # step = 219.575 ms; X = 128*50.5/219.575 = 29.4387
    r = _row(_curve(RESULTS, "1.3B", "InfiniBand"), 128)
    assert r.comm_s == pytest.approx(219.075e-3, rel=1e-9)
    assert r.speedup == pytest.approx(29.4387, abs=1e-4)
    # 7B: T = 12.7 + 2*(127/128)*14e9/25e9 s = 12.7 + 1111.25 = 1123.95 ms
    # step = 1124.45 ms; X = 128*400.5/1124.45 = 51264/1124.45 = 45.5903; E = 45.5903/128 = 0.356174
    r = _row(_curve(RESULTS, "7B", "InfiniBand"), 128)
    assert r.comm_s == pytest.approx(1123.95e-3, rel=1e-9)
    assert r.speedup == pytest.approx(45.5903, abs=1e-4)
    assert r.efficiency == pytest.approx(0.356174, abs=1e-6)


def test_1p3b_and_7b_nvlink_stay_compute_bound_to_128():
    # 1.3B at 128: T = 5.08 + 2*(127/128)*2.6e9/600e9 s = 5.08 + 8.599 = 13.68 ms < 50 ms
    for model in ("1.3B", "7B"):
        for r in _curve(RESULTS, model, "NVLink").rows:
            assert r.speedup == pytest.approx(r.gpus)
            assert r.efficiency == pytest.approx(1.0)


def _seed_reference_ms(num_params, bandwidth_gb, latency_ms, compute_ms, n):
    """The seed's formulas, rewritten here in its own units (ms, GB/s), independently of commcost."""
    comm_ms = 2 * (n - 1) / n * num_params * 2 / (bandwidth_gb * 1e9 / 1e3) + 2 * (n - 1) * latency_ms
    step = max(compute_ms, comm_ms) + 0.5
    speedup = (compute_ms + 0.5) * n / step
    return comm_ms, speedup, speedup / n * 100


def test_every_result_matches_an_independent_rewrite_of_the_seed():
    params = {"125M": (125e6, 3.0), "1.3B": (1.3e9, 50.0), "7B": (7e9, 400.0)}
    fabrics = {"NVLink": (600, 0.02), "InfiniBand": (25, 0.05)}
    for c in RESULTS:
        num_params, compute_ms = params[c.inputs.model.split()[0]]
        bw, lat = fabrics[c.inputs.fabric]
        for r in c.rows:
            comm_ms, speedup, eff_pct = _seed_reference_ms(num_params, bw, lat, compute_ms, r.gpus)
            assert r.comm_s / MS == pytest.approx(comm_ms, rel=1e-12, abs=1e-12)
            assert r.speedup == pytest.approx(speedup, rel=1e-12)
            assert 100 * r.efficiency == pytest.approx(eff_pct, rel=1e-12)


# ------------------------------------------------------------------ the seed's printed 7B analysis (t_o = 0)

# (N, NVLink comm ms, IB comm ms, NVLink X, IB X), each with its hand computation:
# NVLink T = 2(N-1)/N * 14e9/600e9 s + 2(N-1)*0.02 ms; IB T = 2(N-1)/N * 14e9/25e9 s + 2(N-1)*0.05 ms
# X = N * 400 / (400 + 0.15 T)
SEED_PRINTED = [
    (1, 0.0, 0.0, 1.0, 1.0),
    # NV 23.333+0.04 = 23.373;  IB 560+0.1 = 560.1;  X 800/403.506 = 1.983, 800/484.015 = 1.653
    (2, 23.4, 560.1, 2.0, 1.7),
    # NV 35.0+0.12 = 35.12;     IB 840+0.3 = 840.3;  X 1600/405.268 = 3.948, 1600/526.045 = 3.042
    (4, 35.1, 840.3, 3.9, 3.0),
    # NV 40.833+0.28 = 41.113;  IB 980+0.7 = 980.7;  X 3200/406.167 = 7.879, 3200/547.105 = 5.849
    (8, 41.1, 980.7, 7.9, 5.8),
    # NV 43.75+0.6 = 44.35;     IB 1050+1.5 = 1051.5; X 6400/406.653 = 15.738, 6400/557.725 = 11.475
    (16, 44.4, 1051.5, 15.7, 11.5),
    # NV 45.208+1.24 = 46.448;  IB 1085+3.1 = 1088.1; X 12800/406.967 = 31.452, 12800/563.215 = 22.727
    (32, 46.4, 1088.1, 31.5, 22.7),
]


def test_overlap_analysis_is_7b_on_both_fabrics_without_overhead():
    assert [(c.inputs.model, c.inputs.fabric) for c in OVERLAP] == [
        ("7B (Llama-7B equiv)", "NVLink"), ("7B (Llama-7B equiv)", "InfiniBand")]
    for c in OVERLAP:
        assert c.inputs.overhead_s == 0.0
        assert c.inputs.overlap_fraction == 0.85
        assert [r.gpus for r in c.rows] == [1, 2, 4, 8, 16, 32]


@pytest.mark.parametrize("n, nv_ms, ib_ms, nv_x, ib_x", SEED_PRINTED)
def test_overlap_analysis_matches_the_seed_to_its_printed_precision(n, nv_ms, ib_ms, nv_x, ib_x):
    nv, ib = (_row(c, n) for c in OVERLAP)
    assert f"{nv.comm_s / MS:.1f}" == f"{nv_ms:.1f}"
    assert f"{ib.comm_s / MS:.1f}" == f"{ib_ms:.1f}"
    assert f"{nv.speedup_partial:.1f}" == f"{nv_x:.1f}"
    assert f"{ib.speedup_partial:.1f}" == f"{ib_x:.1f}"
    # relative throughput is N t_c / step; efficiency is the same number over N
    assert ib.efficiency_partial == pytest.approx(ib.speedup_partial / n)


def test_7b_infiniband_n2_overlap_variants_and_the_unphysical_flag():
    # T = 560.1 ms, t_c = 400, t_o = 0.5 (results table):
    # none    400 + 560.1 + 0.5 = 960.6 ms          X = 801/960.6   = 0.833854
    # f=0.85  400 + 0.15*560.1 + 0.5 = 484.515 ms    X = 801/484.515 = 1.653200
    # perfect max(400, 560.1) + 0.5 = 560.6 ms       X = 801/560.6   = 1.428827
    # f*T = 476.085 ms > t_c = 400 ms: the seed's partial step beats perfect overlap (flagged);
    # bounded 400 + max(84.015, 160.1) + 0.5 = 560.6 ms = perfect
    r = _row(_curve(RESULTS, "7B", "InfiniBand"), 2)
    assert r.step_no_overlap_s == pytest.approx(960.6e-3)
    assert r.step_partial_s == pytest.approx(484.515e-3)
    assert r.step_s == pytest.approx(560.6e-3)
    assert r.speedup_no_overlap == pytest.approx(0.833854, abs=1e-6)
    assert r.speedup_partial == pytest.approx(1.653200, abs=1e-6)
    assert r.speedup == pytest.approx(1.428827, abs=1e-6)
    assert r.partial_exceeds_perfect
    assert r.step_partial_bounded_s == pytest.approx(560.6e-3)
    # 7B NVLink N=2: f*T = 0.85*23.37 = 19.9 ms < 400 ms: not flagged
    assert not _row(_curve(RESULTS, "7B", "NVLink"), 2).partial_exceeds_perfect


def test_flat_nvlink_rows_beyond_eight_gpus_are_flagged_infiniband_never():
    assert {c.inputs.fabric for c in RESULTS} == {"NVLink", "InfiniBand"}
    for c in RESULTS:
        flags = {r.gpus: r.beyond_flat_ring for r in c.rows}
        if c.inputs.fabric == "NVLink":
            assert flags == {1: False, 2: False, 4: False, 8: False, 16: True, 32: True, 64: True, 128: True}
        else:
            assert not any(flags.values())


def test_one_gpu_has_no_communication():
    r = scaling_row(gpus=1, message_bytes=14e9, compute_s=0.4, overhead_s=0.0005, overlap_fraction=0.85,
                    comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=50e-6)))
    assert r.comm_s == 0.0
    assert r.speedup == r.speedup_partial == r.speedup_no_overlap == 1.0


def test_comm_goes_through_ring_all_reduce():
    link = Link(bandwidth_bytes_per_s=25e9, latency_s=50e-6)
    c = data_parallel_comm(14e9, 32, FlatLinkModel(link=link))
    # 2*31*50 us + 2*(31/32)*14e9/25e9 s = 3.1 ms + 1085 ms
    assert c.op == "all_reduce" and c.algorithm == "ring"
    assert c.latency_s == pytest.approx(3.1e-3)
    assert c.bandwidth_s == pytest.approx(1.085)


# ------------------------------------------------------------------ presets are data

def test_preset_file_keys_carry_units_and_every_entry_a_source():
    raw = json.loads((ROOT / "src/commcost/hardware/scaling_seed.json").read_text())
    assert set(raw["models"]) == {"125m", "1.3b", "7b"}
    assert set(raw["fabrics"]) == {"nvlink", "infiniband"}
    for m in raw["models"].values():
        assert {"name", "params", "compute_ms", "source"} <= set(m)
    for f in raw["fabrics"].values():
        assert {"name", "bandwidth_gb_per_s", "latency_ms_per_ring_step", "source", "note"} <= set(f)
    assert raw["serial_overhead_ms"] == 0.5 and raw["bytes_per_grad"] == 2


def test_presets_convert_to_si_once():
    m, f = seed_models(), seed_fabrics()
    assert m["7b"].params == 7e9 and m["7b"].compute_s == pytest.approx(0.4)
    assert m["125m"].name == "125M (GPT-2 small)" and m["1.3b"].compute_s == pytest.approx(0.05)
    assert f["nvlink"].link.bandwidth_bytes_per_s == 600e9
    assert f["nvlink"].link.latency_s == pytest.approx(20e-6)
    assert f["infiniband"].link.bandwidth_bytes_per_s == 25e9
    assert f["infiniband"].link.latency_s == pytest.approx(50e-6)
    d = seed_defaults()
    assert d.gpu_counts == (1, 2, 4, 8, 16, 32, 64, 128) and d.overlap_fraction == 0.85


@pytest.mark.parametrize("model, fabric, word", [("7B", "nvlink", "model"), ("7b", "NVLink", "fabric"),
                                                 ("7", "nvlink", "model"), ("7b", "ib", "fabric")])
def test_lookup_is_exact_and_lists_valid_keys(model, fabric, word):
    with pytest.raises(InputError, match=rf"unknown {word} .*valid: "):
        seed_inputs(model, fabric, seed_fabric_models()["nvlink"])


# ------------------------------------------------------------------ validation

def _inputs(**over):
    kw = dict(model="m", fabric="f", params=1e9, bytes_per_grad=2, compute_s=0.1, overhead_s=0.0,
              comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=5e-5)), gpu_counts=(1, 2), overlap_fraction=0.5)
    kw.update(over)
    return ScalingInputs(**kw)


@pytest.mark.parametrize("over, shown", [
    ({"gpu_counts": ()}, "()"), ({"gpu_counts": (1, 0)}, "0"), ({"gpu_counts": (2, -4)}, "-4"),
    ({"gpu_counts": (2.5,)}, "2.5"), ({"overlap_fraction": 1.5}, "1.5"), ({"overlap_fraction": -0.1}, "-0.1"),
    ({"compute_s": 0.0}, "0"), ({"overhead_s": -1.0}, "-1"), ({"params": float("nan")}, "nan"),
    ({"bytes_per_grad": 0}, "0"), ({"flat_ring_max_gpus": 0}, "0"),
])
def test_bad_inputs_raise_with_the_value(over, shown):
    with pytest.raises(InputError, match=shown.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        _inputs(**over)


# ------------------------------------------------------------------ invariants

links = st.builds(lambda b, a: Link(bandwidth_bytes_per_s=b, latency_s=a),
                  st.floats(1e9, 1e12), st.floats(0.0, 1e-3))


@settings(max_examples=200, deadline=None)
@given(params=st.floats(1e6, 1e12), compute_s=st.floats(1e-4, 10.0), overhead_s=st.floats(0.0, 0.1),
       link=links, f=st.floats(0.0, 1.0),
       gpus=st.lists(st.integers(1, 100_000), min_size=1, max_size=8, unique=True).map(lambda g: tuple(sorted(g))))
def test_bounds_and_orderings(params, compute_s, overhead_s, link, f, gpus):
    c = scaling_curve(_inputs(params=params, compute_s=compute_s, overhead_s=overhead_s, comm=FlatLinkModel(link=link),
                              overlap_fraction=f, gpu_counts=gpus))
    eps = 1e-9
    for r in c.rows:
        # perfect overlap is the fastest physical step, no overlap the slowest
        assert r.step_no_overlap_s >= r.step_partial_bounded_s * (1 - eps)
        assert r.step_partial_bounded_s >= r.step_s * (1 - eps)
        assert r.step_no_overlap_s >= r.step_partial_s * (1 - eps)
        assert r.efficiency <= 1 + eps and r.efficiency > 0
        assert r.speedup_no_overlap <= r.speedup_partial_bounded * (1 + eps) <= r.speedup * (1 + eps) ** 2
        # the flag is exactly "f T > t_c" (away from the boundary)
        if abs(f * r.comm_s - compute_s) > 1e-9 * max(compute_s, r.comm_s):
            assert r.partial_exceeds_perfect == (f * r.comm_s > compute_s)
    # communication never shrinks as N grows (both terms are non-decreasing in N)
    comms = [r.comm_s for r in c.rows]
    assert all(b >= a * (1 - eps) for a, b in zip(comms, comms[1:]))


@settings(max_examples=100, deadline=None)
@given(compute_s=st.floats(1e-4, 10.0), overhead_s=st.floats(0.0, 0.1), link=links,
       n=st.integers(1, 4096))
def test_overlap_fraction_endpoints(compute_s, overhead_s, link, n):
    none = scaling_row(gpus=n, message_bytes=1e9, compute_s=compute_s, overhead_s=overhead_s,
                       overlap_fraction=0.0, comm=FlatLinkModel(link=link))
    full = scaling_row(gpus=n, message_bytes=1e9, compute_s=compute_s, overhead_s=overhead_s,
                       overlap_fraction=1.0, comm=FlatLinkModel(link=link))
    # f = 0 is no overlap; f = 1 (the seed's formula) leaves only t_c + t_o, the capped one is perfect overlap
    assert none.step_partial_s == pytest.approx(none.step_no_overlap_s)
    assert full.step_partial_s == pytest.approx(compute_s + overhead_s)
    assert full.step_partial_bounded_s == pytest.approx(full.step_s)
    assume(n > 1)
    assert none.speedup == full.speedup
