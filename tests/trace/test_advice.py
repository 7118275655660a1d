"""``trace`` advice (what, why, gain per step), collectives without sizes, and text that fits 80 columns."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.trace.summary import analyze_trace
from conftest import DATA, ROOT
from _kineto import TraceBuilder

TRACES = DATA / "traces"
NCCL = TRACES / "nccl_parser_config__nccl_data.json.gz"


def _one_rank(tmp_path):
    """Three steps of 10,000 us; in each: compute [0, 4000), all-reduce [3000, 6000), compute
    [6050, 7000), then nothing until the next step (times relative to the step's start)."""
    b = TraceBuilder(rank=0, world_size=2)
    for k in range(3):
        t0 = 10_000.0 * k
        b.step(k + 1, t0, 10_000)
        b.compute(t0, 4_000)
        b.param_comms(t0 + 2_990, 5, nelems_in=1000)
        b.nccl(t0 + 3_000, 3_000, launch_ts=t0 + 2_992)
        b.compute(t0 + 6_050, 950)
    return b.write(tmp_path / "rank0.json")


def test_advice_by_hand(tmp_path):
    s = analyze_trace(_one_rank(tmp_path))
    kinds = {a.kind: a for a in s.advice}
    assert [a.kind for a in s.advice] == ["exposed_communication", "idle"]
    # counted: steps 1 and 2 (launched before step 3 starts); exposed per step = 6000 - 4000 = 2000 us
    assert kinds["exposed_communication"].gain_s == pytest.approx(2000e-6)
    assert "all_reduce" in kinds["exposed_communication"].what
    # busy [0, 6000) [6050, 7000) [10000, 16000) [16050, 17000): span 17,000 us, busy 13,900 us,
    # idle 3,100 us over 2 steps = 1,550 us per step; gaps 50 + 3,000 + 50: 97% in the long one
    assert kinds["idle"].gain_s == pytest.approx(1550e-6)
    assert "host" in kinds["idle"].what and "97%" in kinds["idle"].why


def test_advice_on_a_shared_sample_trace():
    out = json.loads(subprocess.run([sys.executable, "-m", "commcost", "trace", str(NCCL), "--json"],
                                    capture_output=True, text=True, cwd=ROOT, timeout=120,
                                    env=dict(os.environ, PYTHONPATH=str(ROOT / "src"))).stdout)
    adv = {a["kind"]: a for a in out["advice"]}
    assert set(adv) == {"idle", "exposed_communication"}
    assert all(set(a) >= {"what", "why", "gain_s"} for a in out["advice"])
    # HTA's figures for this trace (docs/trace.md): idle 336,419.7 us, exposed 20,703.4 us, over the
    # 2 steps counted (#4, #5: launched before #6 starts)
    assert adv["idle"]["gain_s"] == pytest.approx(336_419.7e-6 / 2, abs=1e-6)
    assert adv["exposed_communication"]["gain_s"] == pytest.approx(20_703.4e-6 / 2, abs=1e-6)
    assert out["advice"][0]["kind"] == "idle"


def test_one_annotated_step_of_several_is_per_step():
    s = analyze_trace(TRACES / "cpu_only__rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    (r,) = s.ranks
    (step,) = r.steps
    # one ProfilerStep: the totals cover the whole span W, i.e. W / d steps of the step's duration d
    n = r.total.span_s / step.duration_s
    assert n > 5
    gains = {a.kind: a.gain_s for a in s.advice}
    assert gains["exposed_communication"] == pytest.approx(r.total.exposed_communication_s / n)
    assert gains["idle"] == pytest.approx(r.total.idle_s / n)
    # per step, no gain can exceed the step itself
    assert all(g <= step.duration_s for g in gains.values())


def test_collectives_without_a_size_are_listed(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    for f in ("trace_filter__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz"):
        (d / f).write_bytes((TRACES / f).read_bytes())
    s = analyze_trace(d)
    (u,) = s.unsized
    # each rank's 4 all-reduces record Input type TensorList (no size); their kernels, from the traces:
    # rank 0: 11.727 + 47.652 + 12.119 + 36.158 = 107.656 ms; rank 1: 8.370 + 17.614 + 4.624 + 13.838 = 44.446 ms
    assert (u.op.value, u.count, u.ranks, u.group_size) == ("all_reduce", 8, 2, 128)
    assert u.time_total_s == pytest.approx(0.152102, abs=1e-9)
    # median of the 8: (12.119 + 13.838) / 2 ms
    assert u.time_s == pytest.approx(0.0129785, abs=1e-9)


def _width_lines(*args, columns="80"):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), COLUMNS=columns)
    r = subprocess.run([sys.executable, "-m", "commcost", "trace", *args], capture_output=True, text=True,
                       cwd=ROOT, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines()


@pytest.mark.parametrize("name", sorted(p.name for p in TRACES.glob("*.gz")))
def test_text_fits_80_columns(name):
    for extra in ((), ("--bw", "100", "--latency", "5")):
        lines = _width_lines(str((TRACES / name).relative_to(ROOT)), *extra)
        wide = [x for x in lines if len(x) > 80]
        # only a line holding a word too long for any line (this trace's 83-character path) stays wide
        assert all(any(len(w) > 76 for w in x.split()) for x in wide), wide
        assert len(wide) <= 0.05 * len(lines)


def test_two_ranks_fit_80_columns_and_verbose_has_the_formulas(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    for f in ("trace_filter__sampled_rank-0.json.gz", "trace_filter__sampled_rank-1.json.gz"):
        (d / f).write_bytes((TRACES / f).read_bytes())
    lines = _width_lines(str(d), "--bw", "100", "--latency", "5")
    assert max(len(x) for x in lines) <= 80
    assert any(x.startswith("advice") for x in lines) and any(x.startswith("across ranks") for x in lines)
    verbose = "\n".join(_width_lines(str(d), "--verbose"))
    assert "T_comp = |U(compute)|" in verbose and "algbw" in verbose


_ACTS = st.lists(st.tuples(st.floats(0, 1e-2), st.floats(0, 2e-3), st.sampled_from(["compute", "communication"])),
                 min_size=1, max_size=40)


@settings(max_examples=80, deadline=None)
@given(acts=_ACTS)
def test_gaps_add_up_to_idle_and_exposed_by_op_to_exposed(acts):
    from commcost.comm.collectives import Collective
    from commcost.trace.analysis import breakdown
    from commcost.trace.parallel import _extras

    events = [(s, s + d, kind, Collective.ALL_REDUCE if kind == "communication" else None) for s, d, kind in acts]
    b = breakdown(events)
    exposed, by_op, short, long = _extras(events)
    # the gaps between busy intervals are the idle time; one op: its exposed time is all of it
    assert short + long == pytest.approx(b.idle_s, abs=1e-12)
    assert sum(e - s for s, e in exposed) == pytest.approx(b.exposed_communication_s, abs=1e-12)
    assert sum(by_op.values()) == pytest.approx(b.exposed_communication_s, abs=1e-12)
