"""Each search result's ``plan_command``, run as printed, reproduces its step."""

from __future__ import annotations

import json
import shlex

import pytest

from conftest import run_commcost

pytest.importorskip("numpy")


def _run_printed(command: str) -> dict:
    argv = shlex.split(command)
    assert argv[:2] == ["commcost", "plan"]
    r = run_commcost(*argv[1:], "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("flags", [
    ("--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "512", "--seq", "8192", "--global-batch", "1024"),
    # a flat link, an explicit shape, a given efficiency and fp8: every non-layout flag must travel
    ("--layers", "32", "--hidden", "4096", "--heads", "32", "--ffn-hidden", "11008", "--vocab", "32000",
     "--gated-mlp", "--seq", "4096", "--bw", "50", "--latency", "10us", "--gpu", "h100-sxm", "--gpus", "64",
     "--global-batch", "512", "--efficiency", "0.45", "--precision", "fp8", "--tp-comm-overlap"),
], ids=["system", "flat-shape"])
def test_results_plan_command_reproduces_the_step(flags):
    r = run_commcost("search", *flags, "--top", "3", "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)["results"]
    for res in results[:2]:
        got = _run_printed(res["plan_command"])
        assert got["step_s"] == pytest.approx(res["step_s"], rel=1e-12)
        assert got["layout"] == res["layout"] and got["model"] == res["model"] and got["seq"] == res["seq"]
        assert got["gpu"] == res["gpu"] and got["precision"] == res["precision"]


def test_text_prints_the_whole_command():
    r = run_commcost("search", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "64",
                     "--global-batch", "256", "--top", "2", "--no-progress")
    best = [line for line in r.stdout.splitlines() if line.startswith("best: ")][0]
    assert best.startswith("best: commcost plan --model llama2-7b --seq 4096 --global-batch 256 --system dgx-h100 ")
