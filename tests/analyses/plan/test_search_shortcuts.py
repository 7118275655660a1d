"""What search computes once instead of many times gives what computing it each time gives: the parts of
``--stack auto`` enumerated together (:func:`commcost.analyses.plan.space.enumerate_parts`), the bucket advice once
per layout (:func:`commcost.analyses.plan.search.advised`'s memo)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import assume, given, settings, strategies as st

from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.analyses.plan.search import SearchInputs, SearchSpace, advised, search_passes
from commcost.analyses.plan.space import (RECOMPUTE, bucket_caps_bytes, enumerate_parts, enumerate_space,
                                          parse_fix)
from commcost.comm.model import FabricModel
from commcost.comm.systems import system_group
from commcost.core.errors import InputError
from commcost.core.units import MiB
from commcost.parallel.layout import Layout, expert_data_parallel
from commcost.workload.stacks import STACKS, auto_masks, layout_runs, stack_layouts
from commcost.workload.transformer import TransformerSpec, model_spec

SPEC = TransformerSpec(name="s", layers=8, hidden=512, heads=8, vocab=1024)
SMALL_MOE = TransformerSpec(name="m", layers=4, hidden=256, heads=8, vocab=1024, experts=4, top_k=2)


def _cap_if_kept(space: SearchSpace, row: dict, sp: int, rc: int, z: int, ci: int, stack: str, part):
    """The cap of one configuration if the part keeps it (the scalar rules of space's module docstring), else None."""
    t, p, v, c, e, d, etp, m = (row[k] for k in ("t", "p", "v", "c", "e", "d", "etp", "m"))
    shared = d * c > 1 or (space.spec.experts > 0 and expert_data_parallel(tp=t, dp=d, cp=c, ep=e, expert_tp=etp) > 1)
    fixed = dict(space.fixed)
    if any(fixed.get(k, x) != x for k, x in (("sp", sp), ("recompute", rc), ("zero", z))):
        return None
    if (sp and not (t > 1 and (space.seq // c) % t == 0)) or (z and not shared):
        return None
    kw = dict(tp=t, pp=p, vp=v, cp=c, ep=e, zero=z, sp=sp, recompute=RECOMPUTE[rc], micro_batches=m)
    rules = stack_layouts(stack)
    if rules is not None and not layout_runs(rules, **kw):
        return None
    if (rules is None or part is not None) and not auto_masks(**kw)[part or "auto"]:
        return None
    bucketed = shared and z < 3
    if ci and not bucketed:
        return None
    return bucket_caps_bytes(space)[ci] if bucketed else 0


def _one_by_one(space: SearchSpace, world: int, stack: str, part) -> list[tuple]:
    """The configurations of one part, each checked alone (:func:`_cap_if_kept`): ``(row, sp, recompute, zero, cap
    index, cap)`` in the enumeration's order (sp, recompute, ZeRO, cap, then row)."""
    base, _ = enumerate_space(space, world, "none", stack, part)     # the structural rows: tested in test_space
    rows = [{k: int(col[j]) for k, col in base.items()} for j in range(len(base["t"]))]
    out = []
    for sp, rc, z in ((sp, rc, z) for sp in (0, 1) for rc in range(3) for z in range(4)):
        for ci in range(len(bucket_caps_bytes(space)) if z < 3 else 1):
            for j, row in enumerate(rows):
                cap = _cap_if_kept(space, row, sp, rc, z, ci, stack, part)
                if cap is not None:
                    out.append((j, sp, rc, z, ci, cap))
    return out


@settings(max_examples=12, deadline=None)
@given(world=st.sampled_from([2, 4, 8]), batch=st.sampled_from([4, 8]),
       stack=st.sampled_from(STACKS), moe=st.booleans(),
       fix=st.sampled_from([(), ("zero=1",), ("sp=1",), ("recompute=full",), ("bucket_mb=50",)]))
def test_parts_enumerated_together_equal_each_configuration_checked_alone(world, batch, stack, moe, fix):
    space = SearchSpace(spec=SMALL_MOE if moe else SPEC, seq=1024, global_batch=batch, gpus=(world,),
                        gpus_per_node=8, fixed=parse_fix(list(fix)))
    try:
        inp = SearchInputs(space=space, gpu="h100-sxm", stack=stack)
    except InputError:                           # that stack runs nothing the fix allows (tested elsewhere)
        assume(False)
    parts = tuple(part for _, part in search_passes(inp))
    together = enumerate_parts(space, world, "none", stack, parts)
    assert len(together) == len(parts)
    for part, (base, cols) in zip(parts, together):
        got = list(zip(*(getattr(cols, k).tolist() for k in ("bi", "sp", "rc", "zero", "capi", "cap"))))
        assert got == _one_by_one(space, world, stack, part), part


def _dp_plan(cap_bytes):
    """Llama-3 70B on 64 H100, t = 8, d = 8, ZeRO-1: bucketed gradient reduce-scatters."""
    spec = model_spec("llama3-70b")
    layout = Layout(dp=8, tp=8, pp=1, zero=1, sequence_parallel=True, recompute="selective", micro_batch=1,
                    global_batch=64)
    topo, _ = system_group("dgx-h100", nodes=8)
    model = FabricModel(topology=topo)
    inputs = PlanInputs(spec=spec, layout=layout, seq=8192, gpu="h100-sxm", gpus_per_node=8,
                        bucket_cap_bytes=cap_bytes)
    return plan(inputs, model), model


def test_advice_does_not_depend_on_the_cap_priced_at():
    # the advice sweeps the caps itself (step.bucket_advice.advice_grid): the plan's own cap is no input to it
    advice = [_dp_plan(cap)[0].bucket_advice for cap in (None, 7 * MiB, 100 * MiB, 400 * MiB)]
    assert advice[0] is not None
    assert len({(a.recommended_bytes, a.exposed_s, a.default_exposed_s, a.good_bytes) for a in advice}) == 1


def test_advised_once_per_layout_equals_advised_each_time():
    space = SearchSpace(spec=model_spec("llama3-70b"), seq=8192, global_batch=64, gpus=(64,), gpus_per_node=8)
    inp = SearchInputs(space=space, gpu="h100-sxm")
    memo: dict = {}
    caps = (None, 100 * MiB, 400 * MiB)
    for cap in caps + caps:                     # the second round reads the memo
        p, model = _dp_plan(cap)
        alone, shared = advised(p, model, inp), advised(p, model, inp, memo)
        assert shared.inputs == alone.inputs and shared.step_s == alone.step_s
        assert shared.inputs.bucket_cap_bytes == p.bucket_advice.recommended_bytes
    assert len(memo) == 1                       # one layout, whatever cap it was priced at
    fixed = replace(inp, space=replace(space, fixed=(("bucket_mb", 100),)))
    p, model = _dp_plan(100 * MiB)
    assert advised(p, model, fixed, memo) is p  # a fixed cap is kept


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 1.0, 4096.0, 1e6, 3.3e7, 2.5e9]), st.sampled_from([1, 2, 8, 16, 64]),
                          st.sampled_from([1, 4, 8])), min_size=1, max_size=30), st.integers(1, 4))
def test_pricer_columns_equal_the_model_one_collective_at_a_time(rows, calls):
    """Each distinct (op, size, group, ranks per node) through the CommModel once, in any order of columns: the
    prices are the model's own, zero for a group of one or an empty message."""
    import numpy as np

    from commcost.analyses.plan.grid_distinct import Pricer
    from commcost.comm.collectives import Collective

    topo, _ = system_group("dgx-h100", nodes=8)
    model = FabricModel(topology=topo)
    pricer = Pricer(model)
    op = Collective.ALL_REDUCE
    for k in range(calls):                       # the columns overlap: later ones read what earlier ones priced
        part = rows[k::calls] + rows[:k]
        S, P, r = (np.array(x) for x in zip(*part))
        got = pricer.column(op, S, P, r)
        want = [0.0 if p == 1 or s == 0 else model.cost(op, s, p, ranks_per_node=q).total_s for s, p, q in part]
        assert got.tolist() == want
    assert pricer.distinct == len({(s, p, q) for s, p, q in rows if p != 1 and s != 0})   # every row was asked


@pytest.mark.parametrize("name, tp, pp, ep, zero, gpus", [
    ("llama3-70b", 8, 1, 1, 1, 64),        # ZeRO-1: bucketed reduce-scatters over d = 8 across nodes
    ("llama3-70b", 4, 2, 1, 0, 64),        # DDP all-reduces beside a pipeline
    ("mixtral-8x7b", 2, 1, 4, 1, 64),      # two groups: the dense shard and the expert-data-parallel one
    ("gpt3-175b", 8, 8, 1, 2, 1024),       # ZeRO-2 on 128 nodes
])
def test_advice_priced_as_arrays_is_the_advice(monkeypatch, name, tp, pp, ep, zero, gpus):
    """The sweep's collectives priced in one array pass first (search's advice) give Plan.bucket_advice's advice,
    and the sweep then asks the CommModel nothing more."""
    from commcost.step.bucket_advice import recommend_buckets

    topo, _ = system_group("dgx-h100", nodes=gpus // 8)
    model = FabricModel(topology=topo)
    layout = Layout(dp=gpus // (tp * pp), tp=tp, pp=pp, ep=ep, zero=zero, sequence_parallel=tp > 1,
                    recompute="selective", micro_batch=1, global_batch=gpus * 2)
    p = plan(PlanInputs(spec=model_spec(name), layout=layout, seq=4096, gpu="h100-sxm", gpus_per_node=8), model)
    assert p.dp_timeline is not None
    want = p.bucket_advice                        # every collective priced one at a time
    tl, cost = p.dp_timeline
    calls = []
    real = FabricModel.cost
    monkeypatch.setattr(FabricModel, "cost", lambda self, *a, **k: calls.append(a) or real(self, *a, **k))
    got = recommend_buckets(tl, allreduce_s=cost, arrays=True)
    assert calls == []                            # every size the sweep asked for was priced as an array
    monkeypatch.undo()
    assert got == want                            # the same advice (exposures, caps, choice), float for float
