"""A compute efficiency is refused at the edge, before any work, in the library and on the command line alike
(issue 21: ``SearchInputs(efficiency=1.5)`` used to price the whole grid before failing)."""

from __future__ import annotations

import pytest

from commcost.analyses.plan.search_inputs import SearchInputs
from commcost.analyses.plan.space import SearchSpace
from commcost.core.errors import InputError
from commcost.core.validation import EFFICIENCY_MIN, require_efficiency
from commcost.workload.transformer import model_spec
from conftest import one_error_line, run_commcost


@pytest.mark.parametrize("value", [1.5, 0.0, -0.2, 5e-324, 1e-4, float("nan"), float("inf")])
def test_out_of_range_efficiencies_are_refused(value):
    with pytest.raises(InputError, match="efficiency"):
        require_efficiency(value)


@pytest.mark.parametrize("value", [EFFICIENCY_MIN, 0.45, 1.0])
def test_the_range_ends_are_accepted(value):
    require_efficiency(value)  # 1e-3 and 1 are the closed ends of [1e-3, 1]


def test_search_inputs_refuse_before_any_pricing():
    space = SearchSpace(spec=model_spec("llama2-7b"), seq=4096, global_batch=64, gpus=(16,), gpus_per_node=8)
    with pytest.raises(InputError, match="between 0.001 and 1, got 1.5"):
        SearchInputs(space=space, gpu="h100-sxm", efficiency=1.5)


@pytest.mark.parametrize("command", ["plan", "search"])
def test_the_command_line_names_the_flag_and_the_range(command):
    line = one_error_line(run_commcost(command, "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "16",
                                       "--global-batch", "64", "--efficiency", "5e-324"))
    assert line == ("commcost: error: argument --efficiency: must be a fraction of peak between 0.001 and 1, "
                    "got '5e-324'")
