"""Cost flags bounded where their product could overflow, a --fix that admits no layout, and an
empty --gpu: each refused in one line naming the flag (issue 36 items 5, 7, 11)."""

from __future__ import annotations

import pytest

from conftest import one_error_line, run_commcost

PLAN = ("plan", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "64", "--global-batch", "256")
SEARCH = ("search", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "64", "--global-batch", "256",
          "--no-progress")


@pytest.mark.parametrize("cmd", [PLAN, SEARCH])
@pytest.mark.parametrize("flags, line", [
    # at 6a178e4: exit 0 and 290-300-digit days and dollars; both together named no flag
    (("--train-tokens", "1e300"), "--train-tokens must be between 1 and 1e+16 tokens, got 1e+300"),
    (("--train-tokens", "2T", "--price-per-gpu-hour", "1e300"),
     "--price-per-gpu-hour must be between 0 and 10000 dollars, got 1e+300"),
])
def test_cost_flags_are_bounded(cmd, flags, line):
    assert one_error_line(run_commcost(*cmd, *flags)) == f"commcost: error: {line}"


@pytest.mark.parametrize("cmd", [PLAN, SEARCH])
def test_both_cost_flags_out_of_range_name_a_flag(cmd):
    # at 6a178e4 the non-finite guard refused them with a message that named no flag
    line = one_error_line(run_commcost(*cmd, "--train-tokens", "1e300", "--price-per-gpu-hour", "1e300"))
    assert line in ("commcost: error: --train-tokens must be between 1 and 1e+16 tokens, got 1e+300",
                    "commcost: error: --price-per-gpu-hour must be between 0 and 10000 dollars, got 1e+300")


def test_plan_global_batch_is_bounded():
    r = run_commcost(*PLAN[:-2], "--global-batch", "1000000000000")
    assert "--global-batch must be between 1 and 10,000,000 sequences" in one_error_line(r)


@pytest.mark.parametrize("model, fix", [("llama2-7b", "tp=7"), ("mixtral-8x7b", "etp=3")])
def test_a_fix_that_admits_no_layout_is_refused(model, fix):
    # at 6a178e4: exit 0, "0 configurations evaluated", and a false diagnosis (the model states exceed
    # the GPU in every layout); plan refuses the same value with exit 2
    r = run_commcost("search", "--model", model, "--system", "dgx-h100", "--gpus", "64", "--global-batch", "256",
                     "--fix", fix, "--no-progress")
    assert f"--fix {fix} admits no layout of {model} on 64 GPUs" in one_error_line(r)


def test_a_fix_that_admits_layouts_runs():
    r = run_commcost(*SEARCH, "--fix", "tp=4", "--top", "1", "--json")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("cmd", [PLAN, SEARCH, ("plan", "--model", "llama2-7b", "--bw", "25", "--latency", "20",
                                                "--gpus", "64", "--global-batch", "256")])
def test_an_empty_gpu_is_refused(cmd):
    # at 6a178e4: exit 0 with the system's GPU, or "unknown system None" with --bw/--latency
    assert one_error_line(run_commcost(*cmd, "--gpu", "")) == \
        "commcost: error: argument --gpu: is empty: give a preset name (commcost presets lists them)"
