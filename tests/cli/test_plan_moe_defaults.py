"""``commcost plan`` on a MoE model with no stack and no MoE flag: the recipes' defaults, said in one line."""

from __future__ import annotations

import json

from commcost.cli import main

BASE = ["plan", "--model", "qwen3-30b-a3b", "--system", "dgx-h100", "--gpus", "16", "--tp", "2", "--ep", "8",
        "--global-batch", "64", "--seq", "4096", "--json"]


def test_no_flags_take_the_recipes(capsys):
    assert main(BASE) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["layout"]["expert_tp"] == 1 and d["moe"]["a2a"] == "nccl" and d["moe"]["overlap"] == "1f1b"
    note = d["defaults_note"]
    assert "expert TP 1, nccl all-to-all, MoE overlap 1f1b" in note and "as megatron's published recipes run" in note


def test_a_moe_flag_keeps_the_code_defaults(capsys):
    assert main([*BASE, "--a2a", "nccl"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["layout"]["expert_tp"] == 2 and d["moe"]["overlap"] == "none"
    assert "expert TP" not in d["defaults_note"] and "MoE overlap" not in d["defaults_note"]   # the dense ones stay


def test_a_named_stack_keeps_the_code_defaults(capsys):
    assert main([*BASE, "--stack", "megatron"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["moe"]["overlap"] == "none" and d["defaults_note"] == ""
