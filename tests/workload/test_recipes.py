"""``workload/recipes.py``: what a MoE run takes when the user names no stack and no recipe flag."""

from __future__ import annotations

from commcost.workload.recipes import moe_recipe_defaults, recipe_line


def test_megatron_recipes_overlap_where_the_schedule_allows():
    # no pipeline: the 1F1B all-to-all overlap runs; expert TP 1 (8 experts' ranks divide t d c = 2 x 8 x 1)
    d = moe_recipe_defaults(stack="megatron", tp=2, dp=8, cp=1, ep=8, pp=1, vp=1)
    assert d == {"etp": 1, "a2a": "nccl", "moe_overlap": "1f1b"}
    # a pipeline without virtual stages cannot run it (Megatron-Core needs interleaving): none
    assert moe_recipe_defaults(stack="megatron", tp=2, dp=8, cp=1, ep=8, pp=4, vp=1)["moe_overlap"] == "none"
    assert moe_recipe_defaults(stack="nemo", tp=2, dp=8, cp=1, ep=8, pp=4, vp=2)["moe_overlap"] == "1f1b"


def test_fsdp_stacks_overlap_nothing_and_etp_falls_back_where_ep_does_not_divide():
    assert moe_recipe_defaults(stack="fsdp", tp=1, dp=64, cp=1, ep=8, pp=1, vp=1)["moe_overlap"] == "none"
    # ep 16 does not divide t d c = 1 x 8 x 1: the layout's own default (0)
    assert moe_recipe_defaults(stack="megatron", tp=1, dp=8, cp=1, ep=16, pp=1, vp=1)["etp"] == 0


def test_one_line():
    line = recipe_line({"etp": 1, "a2a": "nccl", "moe_overlap": "1f1b"})
    assert "\n" not in line and "expert TP 1" in line and "overlap 1f1b" in line
