"""Same question, same answer: a layout that does not fit, asked of ``plan`` (its advice lists the ZeRO
stages and recomputations that fit without touching tp or pp) and of ``search`` (tp, pp, cp and the
micro-batch fixed: the same question), must get the same answer."""

from __future__ import annotations

import json
import re

from commcost.analyses.plan.search_inputs import MEMORY_HEADROOM, memory_high_bytes
from commcost.cli import main
from commcost.core.units import format_bytes

SETUP = ["--model", "llama3-8b", "--system", "dgx-h100", "--gpus", "8", "--seq", "8192", "--global-batch", "64"]


def _json(argv, capsys) -> dict:
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _label(layout: dict) -> str:
    """plan's advice label of a ZeRO stage and recomputation (report.plan._option_label)."""
    z, r = layout["zero"], layout["recompute"]
    zero = f"ZeRO-{z}" + (" / FSDP" if z == 3 else "")
    return zero if r == "none" else f"{zero} + --recompute {r}"


def test_plan_advice_lists_search_s_winner(capsys):
    p = _json(["plan", *SETUP, "--tp", "1", "--pp", "1", "--zero", "0", "--micro-batch", "1", "--recompute", "none"],
              capsys)
    assert not p["memory"]["fits"]
    text = p["advice"][0]
    listed = dict(re.findall(r"((?:ZeRO-\d(?: / FSDP)?(?: \+ --recompute \w+)?)|--recompute \w+) "
                             r"(\d+(?:\.\d+)? [KMGT]?B)", text.split("tp or pp: ", 1)[1]))
    assert listed
    s = _json(["search", *SETUP, "--fix", "tp=1,pp=1,cp=1,micro_batch=1", "--top", "3"], capsys)
    best = s["results"][0]
    # the winner is one of the options plan's advice lists, at the memory it lists
    assert _label(best["layout"]) in listed, (best["layout"], text)
    assert listed[_label(best["layout"])] == format_bytes(best["memory"]["total_bytes"])
    assert best["memory_fragile"] is False
    # every option plan lists leaves search's headroom (none is one search would call fragile)
    cap = p["memory"]["capacity_bytes"]
    for label in listed:
        zero = int(label[5]) if label.startswith("ZeRO") else 0
        recompute = label.rsplit(" ", 1)[1] if "--recompute" in label else "none"
        q = _json(["plan", *SETUP, "--tp", "1", "--pp", "1", "--zero", str(zero), "--micro-batch", "1",
                   "--recompute", recompute], capsys)
        assert memory_high_bytes(q["memory"]["total_bytes"]) <= (1 - MEMORY_HEADROOM) * cap, label
    # and plan, asked about the winner, no longer says it does not fit
    assert main(best["plan_command"].split()[1:] + ["--json"]) == 0
    w = json.loads(capsys.readouterr().out)
    assert w["step_s"] == best["step_s"] and w["advice"] == best["advice"]
    assert not any(a.startswith("does not fit") for a in w["advice"])
