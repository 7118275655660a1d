"""``workload/recipes.py``: what a run takes when the user names no stack and no recipe flag (dense and MoE)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from commcost.workload.recipes import (assumed_line, dense_items, dense_recipe_defaults, moe_recipe_defaults,
                                      recipe_bucket_params, recipe_line)


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


def test_megatron_core_bucket_by_hand():
    # Megatron-Core's default: max(40,000,000, 1,000,000 x d c) parameters (distributed_data_parallel.py)
    assert recipe_bucket_params("megatron", dp=8, cp=1) == 40_000_000          # 1e6 x 8 = 8e6 < 4e7
    assert recipe_bucket_params("nemo", dp=64, cp=2) == 128_000_000            # 1e6 x 128 = 1.28e8 > 4e7
    assert recipe_bucket_params("fsdp", dp=64, cp=1) is None                   # PyTorch DDP's 25 MiB: the default
    # at 2 bytes per reduced gradient: 128,000,000 x 2 = 256,000,000 bytes
    d = dense_recipe_defaults(stack="nemo", tp=1, dp=64, cp=2, zero=1, grad_bytes=2.0)
    assert d == {"tp_comm_overlap": False, "bucket_cap_bytes": 256_000_000}   # t = 1: nothing to overlap


def test_dense_defaults_follow_the_implied_stack():
    # Megatron-Core's recipes overlap TP; 40,000,000 x 2 = 80,000,000 bytes of bucket
    assert dense_recipe_defaults(stack="megatron", tp=8, dp=4, cp=1, zero=0, grad_bytes=2.0) == {
        "tp_comm_overlap": True, "bucket_cap_bytes": 80_000_000}
    # ZeRO-3 and a single data-parallel rank run no buckets; torchtitan's and FSDP's recipes no TP overlap
    assert dense_recipe_defaults(stack="megatron", tp=8, dp=4, cp=1, zero=3, grad_bytes=2.0)["bucket_cap_bytes"] is None
    assert dense_recipe_defaults(stack="megatron", tp=8, dp=1, cp=1, zero=1, grad_bytes=2.0)["bucket_cap_bytes"] is None
    assert dense_recipe_defaults(stack="torchtitan", tp=8, dp=4, cp=1, zero=3, grad_bytes=2.0) == {
        "tp_comm_overlap": False, "bucket_cap_bytes": None}


def test_assumed_line_names_each_default_once():
    d = {"tp_comm_overlap": True, "bucket_cap_bytes": 80_000_000}
    # 80,000,000 / 2 = 40M parameters; 80,000,000 / 2**20 = 76.29 MiB
    line = assumed_line("megatron", dense_items(d, grad_bytes=2.0))
    assert line == ("no --stack, no recipe flag: TP communication overlap, DP buckets of 40M parameters (76.3 MiB), "
                    "as megatron's published recipes run")
    assert assumed_line("fsdp", []) == ""


@given(dp=st.integers(1, 4096), cp=st.integers(1, 32), zero=st.integers(0, 3), tp=st.integers(1, 16))
def test_bucket_never_below_megatron_cores_floor_and_grows_with_the_group(dp, cp, zero, tp):
    d = dense_recipe_defaults(stack="megatron", tp=tp, dp=dp, cp=cp, zero=zero, grad_bytes=2.0)
    if zero == 3 or dp * cp == 1:      # no buckets run: nothing assumed
        assert d["bucket_cap_bytes"] is None
    else:                              # at least 40M parameters, and 1M per rank of d c: 2 bytes each
        assert d["bucket_cap_bytes"] >= 80_000_000 and d["bucket_cap_bytes"] >= 2_000_000 * dp * cp
        bigger = dense_recipe_defaults(stack="megatron", tp=tp, dp=dp * 2, cp=cp, zero=zero, grad_bytes=2.0)
        assert bigger["bucket_cap_bytes"] >= d["bucket_cap_bytes"]
    assert d["tp_comm_overlap"] == (tp > 1)
