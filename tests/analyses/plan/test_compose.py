"""The shared composition kernels (commcost.analyses.plan.compose, commcost.core.xp): the scalar namespace behaves as numpy's
functions do, each kernel gives the same number on floats and on numpy columns, and plan runs them
without importing numpy (the core needs nothing installed)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given, strategies as st
from pytest import approx

import commcost.analyses.plan.compose as K
from commcost.workload.memory import buffer_bytes, stage_activation_bytes
from commcost.parallel.layout import heaviest_stage_layers
from commcost.step.timeline import exposed_after_s, uniform_end_s
from commcost.core.xp import SCALAR
from conftest import ROOT

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
positive = st.floats(min_value=1e-9, max_value=1e3)


@given(finite, finite, st.booleans())
def test_scalar_namespace_is_numpy_on_floats(a, b, cond):
    assert SCALAR.maximum(a, b) == float(np.maximum(a, b))
    assert SCALAR.minimum(a, b) == float(np.minimum(a, b))
    assert SCALAR.where(cond, a, b) == float(np.where(cond, a, b))


def _both(kernel, **kw):
    """``kernel`` on floats with SCALAR and on one-element columns with numpy."""
    scalar = kernel(SCALAR, **kw)
    column = kernel(np, **{k: np.array([v]) if isinstance(v, float) else v for k, v in kw.items()})
    return scalar, column


@given(positive, positive, positive, positive, st.booleans(), st.sampled_from([2.0, 3.0]))
def test_kernels_give_the_same_number_on_floats_and_columns(T, t_f, t_attn, count, overlap, passes):
    cases = [
        (K.tp_exposed_s, dict(count=count, one_s=T, layer_fwd_s=t_f, passes=passes, overlap=overlap)),
        (K.tp_exposed_s, dict(count=count, one_s=T, layer_fwd_s=t_f, passes=passes, overlap=overlap,
                              partners_s=((t_f, t_attn), (t_attn, t_f)))),
        (K.cp_exposed_s, dict(rings=count, cp=4.0, one_s=T, attention_s=t_attn)),
        (K.gather_exposed_s, dict(gather_s=T, fwd_s=t_f)),
        (K.nic_share, dict(crossing=2.0, ranks_per_node=1.0, group=4.0)),
        (K.optimizer_s, dict(dense_params=1e9, expert_params=count, dense_ranks=8.0, expert_ranks=2.0, zero=1.0,
                             hbm_bytes_per_s=3.35e12)),
        (uniform_end_s, dict(backward_end_s=count, window_s=t_f, times_s=(T, t_attn, T / 2), full_buckets=3.0,
                             not_ready=(0.9, 0.6, 0.2))),
        (exposed_after_s, dict(end_s=count + T, backward_end_s=count, wire_s=t_attn)),
        (buffer_bytes, dict(pp=2.0, micro_batch=1.0, seq_local=4096.0, hidden=8192.0, tp=8.0, zero3=True,
                            layer_params=count, sequence_parallel=True)),
    ]
    for kernel, kw in cases:
        scalar, column = _both(kernel, **kw)
        assert scalar == float(column[0]), kernel.__name__
    fwd, bwd = K.zero3_layer_exposed_s(SCALAR, gather_s=T, scatter_s=t_attn, layer_fwd_s=t_f)
    cf, cb = K.zero3_layer_exposed_s(np, gather_s=np.array([T]), scatter_s=np.array([t_attn]), layer_fwd_s=np.array([t_f]))
    assert (fwd, bwd) == (float(cf[0]), float(cb[0]))


def test_hand_values():
    # tp overlap, full recomputation (3 passes), 12 collectives a step, a layer's forward 8 ms: the 8 of the
    # forward passes hide behind t_f/4 = 2 ms each, the 4 of the backward behind t_b/4 = 4 ms; at T = 1 ms
    # all hide; at T = 3 ms each forward one exposes 1 ms: 8 ms
    assert K.tp_exposed_s(SCALAR, count=12.0, one_s=1e-3, layer_fwd_s=8e-3, passes=3.0, overlap=True) == 0.0
    assert K.tp_exposed_s(SCALAR, count=12.0, one_s=3e-3, layer_fwd_s=8e-3, passes=3.0, overlap=True) \
        == 8 * 1e-3 + 0.0
    # per GEMM (async TP): 8 collectives of 3 ms, in turn beside GEMMs of 2 ms (2.5 ms decomposed) and 5 ms
    # (5.5 ms decomposed): the first pair takes max(3, 2.5) = 3 ms of which 2 are the GEMM's, 1 ms exposed; the
    # second max(3, 5.5) = 5.5 ms, 0.5 ms over the GEMM (its decomposition's loss): 8/2 x (1 + 0.5) ms = 6 ms
    pairs = ((2e-3, 2.5e-3), (5e-3, 5.5e-3))
    assert K.tp_exposed_s(SCALAR, count=8.0, one_s=3e-3, layer_fwd_s=1.0, passes=2.0, overlap=True,
                          partners_s=pairs) == approx(6e-3, rel=1e-12)
    assert K.tp_exposed_s(SCALAR, count=8.0, one_s=3e-3, layer_fwd_s=1.0, passes=2.0, overlap=False,
                          partners_s=pairs) == 24e-3
    # the all-gathers take the QKV and up projections, the reduce-scatters the output and down projections
    assert K.tp_partners_s(gathers=True, partners_s=(1, 2, 3, 4, 5, 6, 7, 8)) == ((1, 5), (3, 7))
    assert K.tp_partners_s(gathers=False, partners_s=(1, 2, 3, 4, 5, 6, 7, 8)) == ((2, 6), (4, 8))
    assert K.tp_partners_s(gathers=True, partners_s=None) is None
    # no collective (the all-reduce column of a sequence-parallel row): nothing, not the decomposition's loss
    assert K.tp_exposed_s(SCALAR, count=8.0, one_s=0.0, layer_fwd_s=1.0, passes=2.0, overlap=True,
                          partners_s=pairs) == 0.0
    # cp: 10 rings of (4-1) steps of 2 ms, each behind one step of 5/4 = 1.25 ms of attention:
    # 10 x 3 x 0.75 ms = 22.5 ms (not 10 x (6 - 5) ms: the last step's compute has nothing to hide)
    assert abs(K.cp_exposed_s(SCALAR, rings=10.0, cp=4, one_s=2e-3, attention_s=5e-3) - 22.5e-3) < 1e-15
    # pipeline: 1F1B, p = 4, m = 8: bubble 3 t_mb
    assert K.pipeline_terms(micro_batches=8, pp=4, vp=1, compute_mb_s=1.0, critical_mb_s=0.5) == (8.0, 1.5, 4.5)
    # Adam: 28 bytes per parameter of the shard, 1e9 over 8 ranks at ZeRO-1 on 3.5e12 B/s
    assert K.optimizer_s(SCALAR, dense_params=1e9, expert_params=0.0, dense_ranks=8, expert_ranks=1, zero=1,
                         hbm_bytes_per_s=3.5e12) == 28 * 1.25e8 / 3.5e12
    # 96 layers on 8 stages, v = 5 (uneven): ceil(96/40) x 5 = 15
    assert heaviest_stage_layers(SCALAR, 96, 8, 5) == 15.0 and heaviest_stage_layers(SCALAR, 96, 8, 2) == 12.0
    act, first = stage_activation_bytes(SCALAR, pp=1, micro_batches=4, first_layers=2.0, held_layers=2.0,
                                        layer_bytes=10.0, working_bytes=0.0, seq_local=1.0, micro_batch=1.0,
                                        hidden=1.0, tp=1.0, sequence_parallel=False, vocab=1.0, dropout=False)
    assert act == 2 * 10.0 + 4.0        # layers + fp32 logits 4 s b V / t


def test_plan_runs_the_kernels_without_numpy():
    code = ("import sys; sys.path.insert(0, 'src')\n"
            "from commcost.comm.model import FlatLinkModel\nfrom commcost.comm.topology import Link\n"
            "from commcost.parallel.layout import Layout\nfrom commcost.analyses.plan.plan import PlanInputs, plan\n"
            "from commcost.workload.transformer import model_spec\n"
            "L = Layout(dp=2, tp=2, pp=2, vp=1, cp=1, zero=1, micro_batch=1, global_batch=8)\n"
            "p = plan(PlanInputs(spec=model_spec('llama3-8b'), layout=L, seq=2048, gpu='h100-sxm', gpus_per_node=8),"
            " FlatLinkModel(link=Link(bandwidth_bytes_per_s=50e9, latency_s=5e-6)))\n"
            "assert p.step_s > 0\nprint('numpy' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
