"""Direct tests of ``workload/stacks.py``: every stack of the data file loads, ``auto`` resolves by the
layout, unknown names list the valid ones."""

from __future__ import annotations

import pytest

from commcost.core.errors import InputError
from commcost.parallel.layout import Layout
from commcost.workload.stacks import STACKS, auto_is_fsdp, given_stack_flag, resolve_stack, stack


@pytest.mark.parametrize("name", [s for s in STACKS if s != "auto"])
def test_every_stack_loads_with_a_source(name):
    s = stack(name)
    assert s.name == name and s.source and not s.compiled
    assert s.grad_bytes in (2, 4) and 0 < s.sustained <= 1
    assert stack(name, compiled=True).compiled


def test_auto_is_fsdp_only_for_zero3_without_tp_or_pp():
    assert resolve_stack("auto", Layout(dp=8, zero=3, global_batch=8))[0] == "fsdp"
    assert resolve_stack("auto", Layout(dp=4, tp=2, zero=3, global_batch=8))[0] == "megatron"
    assert resolve_stack("auto", Layout(dp=8, zero=1, global_batch=8))[0] == "megatron"
    assert resolve_stack("deepspeed", Layout(dp=8, global_batch=8)) == ("deepspeed", "given (--stack)")
    # the rule is array-safe: elementwise & of the three conditions
    assert [bool(auto_is_fsdp(z, t, p)) for z, t, p in ((3, 1, 1), (3, 2, 1), (3, 1, 2), (2, 1, 1))] == [
        True, False, False, False]


def test_unknown_stack_lists_the_valid_ones():
    with pytest.raises(InputError, match=r"unknown stack 'jax' \(valid: auto, megatron, nemo, deepspeed"):
        stack("jax")
    with pytest.raises(InputError, match="unknown stack 'jax'"):
        resolve_stack("jax", Layout(dp=1, global_batch=1))


def test_a_given_stack_flag_reads_the_stack():
    assert given_stack_flag("auto", "grad_bytes", 99) == 99
    assert given_stack_flag("megatron", "grad_bytes", 99) == stack("megatron").grad_bytes


def test_torchtitan_before_0_1_keeps_weights_gathered_only_under_a_pipeline():
    # torchtitan before PR #822 (2025-02-06) resharded after the forward unless pp_enabled: ZeRO-2
    # (weights kept gathered) only with pp > 1; today's torchtitan runs it either way
    from commcost.workload.stacks import layout_runs, stack_layouts
    old, new = stack_layouts("torchtitan-0.0"), stack_layouts("torchtitan")
    one = dict(tp=1, vp=1, cp=1, ep=1, sp=0)
    assert not layout_runs(old, pp=1, zero=2, **one)
    assert layout_runs(old, pp=1, zero=3, **one)
    assert layout_runs(old, pp=2, zero=2, **one)
    assert layout_runs(new, pp=1, zero=2, **one)
    assert old.zero_without_pp == (0, 3) and new.zero_without_pp == new.zero
