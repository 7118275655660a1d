"""With no ``--stack``, ``plan`` and ``search`` assume the same recipe defaults (:mod:`commcost.workload.recipes`) and
say so on the same ``assumed:`` line: the one layout, planned and searched, prices to the same step."""

from __future__ import annotations

import json

import pytest

from commcost.cli import main

MODEL = ["--model", "llama3-8b", "--system", "dgx-h100", "--global-batch", "64", "--seq", "8192", "--json"]
LAYOUT = ["--gpus", "16", "--tp", "2", "--zero", "1", "--sequence-parallel", "--micro-batch", "1"]


def _run(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_plan_and_search_assume_the_same(capsys):
    fix = "tp=2,pp=1,cp=1,zero=1,sp=1,recompute=none,micro_batch=1,bucket_mb=50"
    s = _run(capsys, ["search", *MODEL, "--gpus", "16", "--top", "1", "--fix", fix])
    p = _run(capsys, ["plan", *MODEL, *LAYOUT, "--bucket-mb", "50"])
    best = s["results"][0]
    assert p["defaults_note"] == s["defaults_note"]
    assert p["defaults_note"] == "no --stack, no recipe flag: TP communication overlap, as megatron's published recipes run"
    assert p["step_s"] == best["step_s"]
    # the result's plan command says it in flags: plan then assumes nothing, as the result says
    assert "--tp-comm-overlap" in best["plan_flags"].split() and best["defaults_note"] == ""


def test_each_flag_given_drops_its_default(capsys):
    both = _run(capsys, ["plan", *MODEL, *LAYOUT])
    # d c = 8 x 1: max(40,000,000, 8,000,000) = 40M parameters x 2 bytes = 80,000,000 B = 76.3 MiB
    assert "TP communication overlap, DP buckets of 40M parameters (76.3 MiB)" in both["defaults_note"]
    off = _run(capsys, ["plan", *MODEL, *LAYOUT, "--no-tp-comm-overlap", "--bucket-mb", "25"])
    assert off["defaults_note"] == ""
    # the defaults are these flags: 80,000,000 B / 2**20 = 76.2939453125 MiB, exactly
    given = _run(capsys, ["plan", *MODEL, *LAYOUT, "--tp-comm-overlap", "--bucket-mb", "76.2939453125"])
    assert given["defaults_note"] == "" and given["step_s"] == both["step_s"]
    named = _run(capsys, ["plan", *MODEL, *LAYOUT, "--stack", "megatron"])
    assert named["defaults_note"] == ""


def test_both_overlap_flags_are_refused(capsys):
    with pytest.raises(SystemExit) as e:
        main(["plan", *MODEL, *LAYOUT, "--tp-comm-overlap", "--no-tp-comm-overlap"])
    assert e.value.code == 2 and "not both" in capsys.readouterr().err


ZERO3_TP = ["--gpus", "16", "--tp", "2", "--zero", "3", "--sequence-parallel", "--micro-batch", "1",
            "--recompute", "none"]


def test_zero3_with_tp_is_torchtitan_without_tp_overlap_in_plan_and_search(capsys):
    # FSDP2 with TP is torchtitan's layout (stacks.json _auto_stacks), whose recipes leave async TP off: with no
    # --stack neither plan nor search assumes TP communication overlap for it, and both price it alike
    fix = "tp=2,pp=1,cp=1,zero=3,sp=1,recompute=none,micro_batch=1"
    s = _run(capsys, ["search", *MODEL, "--gpus", "16", "--top", "1", "--fix", fix])
    p = _run(capsys, ["plan", *MODEL, *ZERO3_TP])
    best = s["results"][0]
    assert p["stack"] == best["stack"] == "torchtitan"
    assert p["defaults_note"] == s["defaults_note"] == ""
    assert "--tp-comm-overlap" not in best["plan_flags"].split()
    assert p["step_s"] == best["step_s"]
    # ZeRO-1 with the same TP stays Megatron-Core's, with its recipes' overlap (test_plan_and_search_assume_the_same)
    z1 = _run(capsys, ["plan", *MODEL, *[a if a != "3" else "1" for a in ZERO3_TP]])
    assert z1["stack"] == "megatron" and "TP communication overlap" in z1["defaults_note"]
