"""Direct tests of ``report/plan.py``: a data-parallel GPT-2 small plan on a flat link rendered in-process;
the collective, the model FLOPs and the throughput by hand; 80 columns; strict JSON whose numbers name their
unit; and a tensor-parallel plan on a system preset with its band."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.analyses.uncertainty import plan_band
from commcost.comm.link import Link
from commcost.comm.model import FabricModel, FlatLinkModel
from commcost.core.units import format_bytes
from commcost.comm.systems import system_group
from commcost.parallel.layout import Layout
from commcost.report.plan import advice, plan_to_dict, render_plan_json, render_plan_text
from commcost.workload.transformer import model_spec
from conftest import numbers_without_a_unit, strict_json, strict_round_trip, wide_lines

LINK = FlatLinkModel(link=Link(bandwidth_bytes_per_s=100e9, latency_s=10e-6))
INP = PlanInputs(spec=model_spec("gpt2-small"), layout=Layout(dp=8, tp=1, pp=1, global_batch=64), seq=1024,
                 gpu="h100-sxm", gpus_per_node=8)


@pytest.fixture(scope="module")
def dp_plan():
    return plan(INP, LINK)


def test_the_gradient_all_reduce_by_hand(dp_plan):
    (row,) = strict_round_trip(plan_to_dict(dp_plan))["comm"]
    # S = 124,439,808 params x 2 B = 248,879,616 B over dp = 8 on one node
    assert (row["dimension"], row["op"], row["size_bytes"], row["group_size"]) == ("dp", "all_reduce", 248_879_616, 8)
    # one ring all-reduce of S: 2(P-1)a + 2(P-1)/P S/B = 14 * 10 us + 1.75 * 248,879,616 / 100e9 = 0.14 + 4.3554 ms
    one = 14 * 10e-6 + 1.75 * 248_879_616 / 100e9
    assert row["one_s"] == pytest.approx(one)
    # DDP's buckets: first 1 MiB, then 25 MiB: S = 237.35 MiB -> 1 + ceil(236.35 / 25) = 11 buckets, each paying
    # 2(P-1)a: wire = 11 * 140 us + 4.3554 ms = 5.8954 ms
    assert row["time_s"] == pytest.approx(11 * 14 * 10e-6 + 1.75 * 248_879_616 / 100e9)
    assert 0 <= row["exposed_s"] <= row["time_s"]


def test_model_flops_and_throughput_by_hand(dp_plan):
    d = strict_round_trip(plan_to_dict(dp_plan))
    # forward per token, gpt2-small (L = 12, h = 768, f = 3072, V = 50,257, 12 heads of 64, s = 1024):
    #   matrices 2 (L (4h^2 + 2hf) + V h) = 2 (12 * 7,077,888 + 38,597,376) = 247,064,064
    #   scores 2 L s n_q (d_qk + d) = 2 * 12 * 1024 * 12 * 128 = 37,748,736; sum 284,812,800
    # model FLOPs = 3 x forward x 64 * 1024 tokens = 854,438,400 * 65,536 = 55,996,474,982,400
    assert d["model_flops_per_step"] == pytest.approx(55_996_474_982_400)
    assert d["params"] == 124_439_808 and d["gpus"] == 8
    assert d["tokens_per_s_per_gpu"] == pytest.approx(64 * 1024 / d["step_s"] / 8)
    assert d["mfu"] == pytest.approx(d["model_flops_per_step"] / d["step_s"] / 8 / d["peak_flops_per_s"])
    b = d["breakdown"]
    assert d["step_s"] == pytest.approx(b["compute_s"] + b["pipeline_bubble_s"] + b["exposed_comm_s"] + b["optimizer_s"]
                                        + b["losses"]["total_s"])
    assert d["bounds"]["all_hidden_s"] <= d["step_s"] <= d["bounds"]["no_overlap_s"]
    assert numbers_without_a_unit(d) == []


def test_text_fits_80_columns_with_units(dp_plan, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    text = render_plan_text(dp_plan)
    assert wide_lines(text) == []
    flat = " ".join(text.split())
    assert "fabric: flat link: B = 100 GB/s per rank, a = 10 us per ring step" in flat
    assert "dp all_reduce 248.88 MB 8 8 1 4.50 ms 5.90 ms" in flat   # 248,879,616 B; 4.4954 ms; 5.8954 ms
    assert "memory per GPU" in flat and "GB = 1e9 bytes" in flat


def test_json_text_is_strict_and_carries_extra_keys(dp_plan):
    d = strict_json(render_plan_json(dp_plan, extra={"command": "plan"}))
    assert d["command"] == "plan" and d["sensitivity"] == [] and d["model"] == "gpt2-small"
    assert json.loads(render_plan_json(dp_plan))["advice"] == advice(dp_plan)


def test_tp_plan_on_a_system_with_its_band(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    topo, _ = system_group("dgx-h100", nodes=4)
    comm = FabricModel(topology=topo)
    inp = PlanInputs(spec=model_spec("llama3-8b"), layout=Layout(dp=4, tp=8, pp=1, global_batch=64), seq=4096,
                     gpu="h100-sxm", gpus_per_node=8)
    p = plan(inp, comm)
    band = plan_band(inp, p, comm, topo)
    d = strict_round_trip(plan_to_dict(p, band))
    assert numbers_without_a_unit(d) == []
    assert {row["dimension"] for row in d["comm"]} >= {"tp", "dp"}
    assert d["step_band_s"][0] <= d["step_band_s"][1]
    text = render_plan_text(p, band=band)
    assert wide_lines(text) == [] and "measured band" in text
    assert len(advice(p)) <= 2


def test_plan_names_the_stacks_that_run_its_layout_past_releases_too(dp_plan):
    # DDP over 8 ranks, recompute none, m = 64 / (1 x 8) = 8 micro-batches: every stack runs ZeRO-0 without model
    # parallelism, today's then the past releases, except torchtitan-0.0 (no gradient accumulation without a pipeline)
    # and llm-foundry-2023 (FULL_SHARD or SHARD_GRAD_OP only: ZeRO-3 or 2)
    want = ("megatron", "nemo", "deepspeed", "torchtitan", "fsdp", "megatron-2021", "megatron-2022", "megatron-2023",
            "megatron-2024", "nemo-2024", "nemo-2024h1", "deepspeed-2022", "amd-fsdp-te-2025")
    assert plan_to_dict(dp_plan)["stacks_that_run"] == list(want)
    text = render_plan_text(dp_plan)
    assert "  stacks that run this layout (hardware/stacks.json): " + ", ".join(want) in text.replace("\n    ", " ")


def test_full_recompute_prints_the_peak_allocated_as_a_range():
    p = plan(replace(INP, layout=Layout(dp=8, tp=1, pp=1, global_batch=64, recompute="full")), LINK)
    lo, hi = p.memory.allocated_bytes
    assert hi - lo == p.memory.working_spread_bytes > 0
    text = render_plan_text(p)
    assert f"peak allocated {format_bytes(lo)}-{format_bytes(hi)} (recompute working set 1-2 layers)" in text
    assert not wide_lines(text)
    assert strict_round_trip(plan_to_dict(p))["memory"]["peak_allocated_range_bytes"] == [lo, hi]
