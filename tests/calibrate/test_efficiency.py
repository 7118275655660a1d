"""Direct tests of ``calibrate/efficiency.py``: the efficiency that makes plan reproduce a measured step,
its file, and the note that says where it applies."""

from __future__ import annotations

from dataclasses import replace

import pytest

from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.calibrate.efficiency import (ETA_MIN, calibration_note, efficiency_from, fit_efficiency, load_calibration,
                                           model_family, save_calibration)
from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.core.errors import InputError
from commcost.parallel.layout import Layout
from commcost.workload.transformer import model_spec

LINK = FlatLinkModel(link=Link(bandwidth_bytes_per_s=100e9, latency_s=10e-6))
INP = PlanInputs(spec=model_spec("llama3-8b"), layout=Layout(dp=8, tp=1, pp=1, global_batch=64, zero=1), seq=4096,
                 gpu="h100-sxm", gpus_per_node=8)


@pytest.mark.parametrize("name, family", [("llama3-70b", "llama3"), ("megatron-gpt-145.6b", "megatron-gpt"),
                                          ("qwen3-30b-a3b", "qwen3"), ("mixtral-8x7b", "mixtral"),
                                          ("gpt2-small", "gpt2-small")])
def test_model_family(name, family):
    assert model_family(name) == family


def test_fit_reproduces_the_step_it_was_given():
    # the step plan prices at eta = 0.4 is measured: the fit finds 0.4 back
    measured = plan(replace(INP, efficiency=0.4), LINK).step_s
    eta = fit_efficiency(INP, LINK, measured)
    assert eta == pytest.approx(0.4, rel=1e-6)
    assert plan(replace(INP, efficiency=eta), LINK).step_s == pytest.approx(measured, rel=1e-9)


def test_a_step_outside_the_range_is_refused_with_the_bound():
    fastest = plan(replace(INP, efficiency=1.0), LINK).step_s
    with pytest.raises(InputError, match="is below this plan's step at 100% compute efficiency"):
        fit_efficiency(INP, LINK, fastest / 2)
    with pytest.raises(InputError, match=f"needs an efficiency below {ETA_MIN:g}"):
        fit_efficiency(INP, LINK, 1e6)


def test_file_round_trip_and_the_note(tmp_path):
    path = tmp_path / "cal.json"
    save_calibration(str(path), INP, 0.4, 3.5)
    doc = load_calibration(str(path))
    assert (doc["efficiency"], doc["family"], doc["gpu"], doc["measured_step_s"]) == (0.4, "llama3", "h100-sxm", 3.5)
    assert calibration_note(doc, INP) == "calibrated on llama3-8b (h100-sxm, bf16, step 3.5 s)"
    other = PlanInputs(spec=model_spec("mixtral-8x7b"), layout=INP.layout, seq=4096, gpu="b200", gpus_per_node=8)
    assert calibration_note(doc, other).endswith(
        "; applied outside its scope: model family llama3 -> mixtral, gpu h100-sxm -> b200")


@pytest.mark.parametrize("text, fragment", [
    ("{", "invalid JSON"), ('{"kind": "x"}', "not a commcost plan calibration"),
    ('{"kind": "commcost-plan-calibration", "efficiency": 1.5}', "efficiency must be in (0, 1], got 1.5"),
    ('{"kind": "commcost-plan-calibration", "efficiency": true}', "efficiency must be in (0, 1], got True"),
])
def test_bad_files_are_one_line(tmp_path, text, fragment):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        load_calibration(str(path))
    assert str(exc.value).startswith(f"{path}: ") and fragment in str(exc.value)


def test_efficiency_from_a_flop_rate_fits_the_step_that_rate_gives():
    # T* = F_model / (X* W): the plan's model FLOPs per step over the measured rate times its 8 GPUs
    F = plan(INP, LINK).model_flops_per_step
    X = 300e12
    eta, measured = efficiency_from(INP, LINK, measured_flops_per_s=X)
    assert measured == pytest.approx(F / (X * 8), rel=1e-15)
    assert plan(replace(INP, efficiency=eta), LINK).step_s == pytest.approx(measured, rel=1e-9)
    step_eta, step_measured = efficiency_from(INP, LINK, measured_step_s=measured)
    assert (step_eta, step_measured) == (eta, measured)
    assert efficiency_from(INP, LINK) == (None, None)         # nothing measured: nothing fitted
