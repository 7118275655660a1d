"""One bucket rule: plan, budget, timeline and search give the same recommended cap for the same data-parallel
step (step.bucket_advice), on three setups."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from commcost.cli import main

SETUPS = {
    # 13B on 64 A100 (8 DGX A100 nodes), 4 micro-batches of 1 x 4096 tokens, plain DDP
    "llama2-13b-64-a100": (["--model", "llama2-13b", "--system", "dgx-a100", "--gpus", "64", "--global-batch", "256",
                            "--micro-batch", "1", "--zero", "0", "--seq", "4096"],
                           ["--system", "dgx-a100", "--nodes", "8", "--model", "llama2-13b"]),
    # the drill's flat link: 32 GPUs at 25 GB/s, 20 us per ring step, a 1.3B model
    "drill-link-gpt3-1.3b": (["--model", "gpt3-1.3b", "--gpus", "32", "--bw", "25", "--latency", "20", "--gpu",
                              "a100-sxm4-80gb", "--global-batch", "64", "--micro-batch", "1", "--zero", "0",
                              "--seq", "2048"],
                             ["--gpus", "32", "--bw", "25", "--latency", "20", "--model", "gpt3-1.3b"]),
    # 7B on 2 DGX H100 nodes, 2 micro-batches
    "llama2-7b-16-h100": (["--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "16", "--global-batch", "32",
                           "--micro-batch", "1", "--zero", "0", "--seq", "4096"],
                          ["--system", "dgx-h100", "--nodes", "2", "--model", "llama2-7b"]),
}


def _json(argv: list[str]) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main([*argv, "--json"]) == 0, argv
    return json.loads(out.getvalue())


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_plan_budget_and_timeline_recommend_the_same_cap(name):
    plan_argv, group = SETUPS[name]
    p = _json(["plan", *plan_argv])
    advice = p["bucket_advice"]
    assert advice["stream"] == "per-tensor"     # pure data parallelism of a model the timeline lays out
    tl = advice["timeline"]
    step = ["--step-ms", repr(tl["micro_batch_s"] * 1e3), "--backward-fraction", repr(tl["backward_fraction"]),
            "--grad-accum", str(tl["grad_accum"]), "--dtype", {2: "bf16", 4: "fp32"}[tl["bytes_per_grad"]]]
    b = _json(["budget", *group, *step])
    t = _json(["timeline", *group, *step, "--bucket", "auto"])
    assert b["bucket_advice"]["recommended_bytes"] == advice["recommended_bytes"]
    assert t["bucket_advice"]["recommended_bytes"] == advice["recommended_bytes"]
    assert b["bucket_advice"]["exposed_s"] == pytest.approx(advice["exposed_s"], rel=1e-6)


def test_the_drill_link_budget_and_timeline_agree():
    # the drill itself (--params: gradients at a uniform rate, no shape): the two commands agree
    drill = ["--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3", "--step-ms", "400"]
    b = _json(["budget", *drill])
    t = _json(["timeline", *drill, "--bucket", "auto"])
    assert b["bucket_advice"]["recommended_bytes"] == t["bucket_advice"]["recommended_bytes"]


@pytest.mark.parametrize("argv", [
    ["--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "16", "--seq", "4096", "--global-batch", "32"],
    ["--model", "gpt3-1.3b", "--system", "dgx-a100", "--gpus", "32", "--seq", "2048", "--global-batch", "64"],
])
def test_search_prints_each_result_at_its_advice(argv):
    d = _json(["search", *argv, "--top", "3", "--no-progress"])
    assert d["results"]
    for r in d["results"]:
        if r["bucket_advice"] is None:
            continue
        cmd = r["plan_command"].split()
        mb = float(cmd[cmd.index("--bucket-mb") + 1])
        assert int(mb * 2**20) == r["bucket_advice"]["recommended_bytes"]    # DDP's int(bucket_cap_mb * 2**20)
