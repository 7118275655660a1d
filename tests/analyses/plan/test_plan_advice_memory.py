"""plan's advice (``analyses/plan/advice.py``, worded by ``report/plan.py``) lists every ZeRO stage and
recomputation that fits before it suggests tp/pp, and names the largest term of the step."""

from __future__ import annotations

from dataclasses import replace

from commcost.comm.model import FlatLinkModel
from commcost.comm.link import Link
from commcost.parallel.layout import Layout
from commcost.analyses.plan.plan import PlanInputs, plan, plan_memory
from commcost.analyses.plan.search_inputs import MEMORY_HEADROOM, memory_high_bytes
from commcost.analyses.plan.advice import HINT_SHARE, memory_options, step_hint
from commcost.report.plan import _option_label, advice
from commcost.workload.transformer import model_spec

COMM = FlatLinkModel(link=Link(bandwidth_bytes_per_s=50e9, latency_s=10e-6))


def _plan(**layout):
    L = Layout(**{"dp": 8, "tp": 8, "pp": 1, "global_batch": 256, **layout})
    return plan(PlanInputs(spec=model_spec("llama3-70b"), layout=L, seq=8192, gpu="h100-sxm", gpus_per_node=8), COMM)


def test_every_fitting_zero_stage_and_recomputation_is_listed_and_no_other():
    p = _plan()
    assert not p.memory.fits
    options = {_option_label(o): o.total_bytes for o in memory_options(p)}
    L = p.inputs.layout
    for z in (0, 1, 2, 3):
        for r in ("none", "selective", "full"):
            if (z, r) == (L.zero, L.recompute):
                continue
            # the plan's own memory of the changed layout (its stack and precision)
            m = plan_memory(replace(p.inputs, layout=replace(L, zero=z, recompute=r)))
            label = (f"ZeRO-{z}" + (" / FSDP" if z == 3 else "")) if r == "none" else \
                f"--recompute {r}" if z == 0 else f"ZeRO-{z} + --recompute {r}"
            def spare(mb):  # fits with search's headroom: M_hi <= (1 - h) capacity
                return mb.fits and memory_high_bytes(mb.total_bytes) <= (1 - MEMORY_HEADROOM) * mb.capacity_bytes

            alone_fits = z > 0 and r != "none" and spare(plan_memory(replace(p.inputs, layout=replace(L, zero=z))))
            if spare(m) and not alone_fits:
                assert options[label] == m.total_bytes, label
            else:
                assert label not in options, label
    assert options  # llama3-70b at tp 8 fits with recomputation and a ZeRO stage
    text = advice(p)[0]
    assert "raise tp or pp" not in text and all(label in text for label in options)


def test_tp_pp_only_when_nothing_else_fits():
    # one data-parallel rank: no ZeRO stage shards anything; 16 B per parameter of 70.6B / 8 = 141 GB of model
    # states per GPU alone exceed 80 GB, whatever is recomputed
    p = _plan(dp=1, tp=8, global_batch=256)
    assert not p.memory.fits and memory_options(p) == ()
    assert "raise tp or pp" in advice(p)[0]


def test_the_hint_is_the_largest_term_over_five_percent_of_the_step():
    # tp 8 across 8-GPU nodes on a 50 GB/s link: the largest of the bubble (none: pp 1) and each dimension's
    # exposed communication, as its share of the step
    p = _plan(zero=1, recompute="full")
    terms = {"bubble": p.pipeline_bubble_s, **p.exposed_by_dimension()}
    term, worst = max(terms.items(), key=lambda kv: kv[1])
    h = step_hint(p)
    if worst > HINT_SHARE * p.step_s:
        assert h is not None and h.term == term and h.share == worst / p.step_s
        assert advice(p)[-1].startswith(("pipeline bubble" if term == "bubble" else f"exposed {term.upper()}"))
    else:
        assert h is None
