"""The plan and search request builder (:mod:`commcost.cli.inputs_plan`): the Namespace is never written."""

from __future__ import annotations

from commcost.cli import plan
from commcost.cli.inputs_plan import plan_request
from conftest import parse_flags as _ns


def test_plan_request_resolves_the_gpus_without_writing_them():
    ns = _ns(plan, "--model", "llama2-7b", "--system", "dgx-h100", "--dp", "4", "--tp", "2", "--global-batch", "256",
             "--bucket-mb", "50")
    req = plan_request(ns)
    assert ns.gpus is None
    assert req.inputs.layout.world == 8  # dp x tp = 4 x 2
    assert req.inputs.bucket_cap_bytes == 50 * 2**20
    assert req.measured_step_s is None and req.save_calibration is None
