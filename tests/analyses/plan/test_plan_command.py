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
    # a past release (Megatron-LM of 2021): its advice pastes, the stack travels with it
    ("--model", "megatron-gpt-1.7b", "--system", "dgx-a100", "--gpus", "32", "--seq", "2048", "--global-batch", "512",
     "--precision", "fp16", "--stack", "megatron-2021"),
    # a rank order other than Megatron's: search places every group by it, and the command carries it
    ("--model", "mixtral-8x7b", "--system", "dgx-h100", "--gpus", "32", "--seq", "4096", "--global-batch", "64",
     "--fix", "tp=2", "--order", "pp-dp-ep-cp-tp"),
], ids=["system", "flat-shape", "past-release", "order"])
def test_results_plan_command_reproduces_the_step(flags):
    r = run_commcost("search", *flags, "--top", "3", "--json", "--no-progress")
    assert r.returncode == 0, r.stderr
    results = json.loads(r.stdout)["results"]
    for res in results[:2]:
        if "--stack" in flags:
            assert "--stack megatron-2021" in res["plan_command"]
        if "--order" in flags:
            assert "--order pp-dp-ep-cp-tp" in res["plan_command"] and res["layout"]["order"] == "pp-dp-ep-cp-tp"
        got = _run_printed(res["plan_command"])
        assert got["step_s"] == pytest.approx(res["step_s"], rel=1e-12)
        assert got["layout"] == res["layout"] and got["model"] == res["model"] and got["seq"] == res["seq"]
        assert got["gpu"] == res["gpu"] and got["precision"] == res["precision"]


def test_text_prints_the_whole_command_and_it_pastes_into_a_shell():
    import os
    import subprocess
    import sys

    from conftest import ROOT

    r = run_commcost("search", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "64",
                     "--global-batch", "256", "--top", "2", "--no-progress", "--json")
    command = json.loads(r.stdout)["results"][0]["plan_command"]
    lines = run_commcost("search", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "64",
                         "--global-batch", "256", "--top", "2", "--no-progress").stdout.splitlines()
    i = [k for k, line in enumerate(lines) if line.startswith("best: ")][0]
    block = [lines[i][len("best: "):]]
    while block[-1].endswith(" \\"):
        i += 1
        block.append(lines[i])
    pasted = "\n".join(block)
    assert pasted.startswith("commcost plan --model llama2-7b --seq 4096 --global-batch 256")
    # pasted into bash as printed (backslash-newline continuations), with commcost the module
    script = f'commcost() {{ "{sys.executable}" -m commcost "$@"; }}\n{pasted} --json\n'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["step_s"] == pytest.approx(_run_printed(command)["step_s"], rel=1e-12)


SEARCH = ("search", "--model", "llama2-7b", "--system", "dgx-h100", "--gpus", "64", "--global-batch", "256",
          "--no-progress")


def test_rank_robust_orders_by_the_bands_upper_edge():
    r = run_commcost(*SEARCH, "--rank", "robust", "--top", "5", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["rank_by"] == "robust"
    upper = [res["robust_step_s"] for res in d["results"]]
    assert upper == sorted(upper)
    for res in d["results"]:  # the upper edge is the plan's own band's, and never below its step
        assert res["robust_step_s"] == res["step_band_s"][1] >= res["step_s"]
    # the robust winner's upper edge is no worse than the step-ranked winner's
    step_first = json.loads(run_commcost(*SEARCH, "--top", "1", "--json").stdout)["results"][0]
    assert upper[0] <= step_first["step_band_s"][1] * (1 + 1e-12)


def test_rank_robust_needs_a_system_and_rank_cost_a_price():
    r = run_commcost("search", "--model", "llama2-7b", "--bw", "50", "--latency", "10", "--gpu", "h100-sxm",
                     "--gpus", "64", "--global-batch", "256", "--rank", "robust", "--no-progress")
    assert r.returncode == 2 and "--rank robust" in r.stderr and "Traceback" not in r.stderr
    r = run_commcost(*SEARCH, "--rank", "cost")
    assert r.returncode == 2 and "--price-per-gpu-hour" in r.stderr
    d = json.loads(run_commcost(*SEARCH, "--rank", "cost", "--price-per-gpu-hour", "2", "--top", "3", "--json").stdout)
    costs = [res["usd_per_million_tokens"] for res in d["results"]]
    assert d["objective"] == "cost" and costs == sorted(costs)


def test_search_fits_80_columns():
    import os
    import subprocess
    import sys

    from conftest import ROOT

    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), COLUMNS="80")
    for extra in ((), ("--rank", "robust", "--train-tokens", "2T", "--price-per-gpu-hour", "2")):
        out = subprocess.run([sys.executable, "-m", "commcost", *SEARCH, *extra], capture_output=True, text=True,
                             env=env, cwd=ROOT, timeout=120).stdout
        lines = out.splitlines()
        wide = [ln for ln in lines if len(ln) > 80]
        assert len(lines) > 20 and len(wide) <= 0.05 * len(lines), wide
