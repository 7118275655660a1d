"""``plan`` and ``search`` check the options they share with one rule (:func:`commcost.analyses.plan.plan.check_run_options`,
:func:`~commcost.analyses.plan.plan.check_offload`): the same bad option is refused by both, with the same line."""

from __future__ import annotations

import pytest

from commcost.analyses.plan.plan import PlanInputs
from commcost.analyses.plan.search import SearchInputs, SearchSpace
from commcost.core.errors import InputError
from commcost.parallel.layout import Layout
from commcost.workload.transformer import model_spec

SPEC = model_spec("llama3-8b")

BAD = [
    dict(precision="fp7"),
    dict(efficiency=1.5),
    dict(a2a="carrier-pigeon"),
    dict(fp8_dispatch=True),                      # DeepEP's: needs --a2a deepep
    dict(moe_overlap="sometimes"),
    dict(expert_load=0.5),                        # the busiest rank over the mean is at least 1
]


def _message(build) -> str:
    with pytest.raises(InputError) as e:
        build()
    return str(e.value)


@pytest.mark.parametrize("bad", BAD, ids=lambda d: next(iter(d)))
def test_plan_and_search_refuse_a_bad_option_with_one_line(bad):
    plan_line = _message(lambda: PlanInputs(spec=SPEC, layout=Layout(dp=8, global_batch=8), seq=4096, gpu="h100-sxm",
                                            gpus_per_node=8, **bad))
    search_line = _message(lambda: SearchInputs(space=SearchSpace(spec=SPEC, seq=4096, global_batch=64, gpus=(8,),
                                                                  gpus_per_node=8), gpu="h100-sxm", **bad))
    assert plan_line == search_line


def test_offloading_more_layers_than_the_model_has_is_refused_alike():
    # 2 layers offloaded run in both; one more layer than the model has: the same refusal from the one rule
    space = SearchSpace(spec=SPEC, seq=4096, global_batch=64, gpus=(8,), gpus_per_node=8,
                        fixed=(("pp", 1), ("recompute", 0)))
    ok_plan = PlanInputs(spec=SPEC, layout=Layout(dp=8, global_batch=8), seq=4096, gpu="h100-sxm", gpus_per_node=8,
                         cpu_offload_layers=2)
    ok_search = SearchInputs(space=space, gpu="h100-sxm", cpu_offload_layers=2)
    assert ok_plan.cpu_offload_layers == ok_search.cpu_offload_layers == 2
    too_many = SPEC.layers + 1
    plan_line = _message(lambda: PlanInputs(spec=SPEC, layout=Layout(dp=8, global_batch=8), seq=4096, gpu="h100-sxm",
                                            gpus_per_node=8, cpu_offload_layers=too_many))
    search_line = _message(lambda: SearchInputs(space=space, gpu="h100-sxm", cpu_offload_layers=too_many))
    assert plan_line == search_line
