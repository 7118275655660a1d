"""The timeline refuses a shape too large to model before anything builds its layers (issue 10, item 5):
in the library alone (``TimelineInputs``, ``BudgetInputs``: :func:`commcost.workload.shape.check_timeline_shape`),
and through the timeline's shape flags."""

from __future__ import annotations

import pytest

from commcost.core.errors import InputError
from commcost.analyses.drill.budget import BudgetInputs
from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.step.timeline import TimelineInputs
from commcost.workload.shape import MAX_LAYERS
from commcost.workload.transformer import TransformerSpec
from conftest import run_commcost, one_error_line


def test_timeline_shape_too_large_to_simulate_names_the_shape_flags():
    # 10,000 layers of 12 * 20,000^2 = 4.8e9 params each = 4.8e13 params, 9.6e13 B at bf16: 3.66e6 buckets
    # of 25 MiB > 2^20; the error said "--model" though no --model was given
    line = one_error_line(run_commcost("timeline", "--gpus", "16", "--bw", "50", "--latency", "5", "--layers",
                                       "10000", "--hidden", "20000", "--seq", "2048", "--step-ms", "300"))
    assert line.startswith("commcost: error: --layers/--hidden: a 9.6e+13-byte gradient") and "1,048,576" in line


FLAT = FlatLinkModel(link=Link(bandwidth_bytes_per_s=25e9, latency_s=20e-6))


@pytest.mark.parametrize("inputs", [
    lambda spec: TimelineInputs(gpus=8, comm=FLAT, step_s=1.0, shape=spec, seq=2048),
    lambda spec: BudgetInputs(gpus=8, comm=FLAT, params=1e9, step_s=1.0, shape=spec, seq=2048,
                              intra_node_comm=FLAT),
], ids=["timeline", "budget"])
def test_model_shape_guard_runs_before_the_per_layer_model(inputs):
    # the library refuses alone (a notebook user has no flags): O(1) closed-form count, no layer list
    with pytest.raises(InputError, match=f"layers must be at most {MAX_LAYERS:,}, got 10,000,000"):
        inputs(TransformerSpec(layers=10_000_000, hidden=2048, heads=1))
    # 10,000 layers of 12 h^2 = 12e12 params each at h = 1e6 is 1.2e17 > 1e15
    with pytest.raises(InputError, match="1.2e\\+17 parameters; at most 1e\\+15"):
        inputs(TransformerSpec(layers=10_000, hidden=10**6, heads=1))
