"""search --emit: the winner's config, read back by --from to the same layout and step."""

from __future__ import annotations

import json

from conftest import run_commcost

COMMON = ("--system", "dgx-h100", "--gpus", "64")


def _step(*args: str) -> dict:
    r = run_commcost("plan", *args, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_emit_torchtitan_then_from_reproduces_the_winners_step(tmp_path):
    f = tmp_path / "winner.toml"
    r = run_commcost("search", "--model", "llama3.1-8b", *COMMON, "--seq", "8192", "--global-batch", "256",
                     "--stack", "torchtitan", "--emit", "torchtitan", str(f), "--json")
    assert r.returncode == 0, r.stderr
    winner = json.loads(r.stdout)["results"][0]
    back = _step("--from", str(f), *COMMON)           # the file names the model (llama3 8B) and the seq
    assert back["layout"] == winner["layout"]
    assert back["step_s"] == winner["step_s"]


def test_emit_megatron_then_from_reproduces_the_winners_step(tmp_path):
    f = tmp_path / "winner.args"
    r = run_commcost("search", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "128", "--seq", "4096",
                     "--global-batch", "512", "--stack", "megatron", "--emit", "megatron", str(f), "--json")
    assert r.returncode == 0, r.stderr
    winner = json.loads(r.stdout)["results"][0]
    back = _step("--from", str(f), "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "128")
    assert back["layout"] == winner["layout"]
    assert back["step_s"] == winner["step_s"]


def test_emit_refuses_what_the_framework_cannot_state(tmp_path):
    r = run_commcost("search", "--model", "llama3.1-8b", *COMMON, "--seq", "8192", "--global-batch", "256",
                     "--emit", "nonsense", str(tmp_path / "x"))
    assert r.returncode == 2 and "valid kinds" in r.stderr
