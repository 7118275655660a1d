"""search against the published layout of the same model, GPU count, sequence and batch."""

from __future__ import annotations

import csv
import json

import pytest
from conftest import DATA

from commcost.cli import main
from commcost.hardware import load_preset_file
from commcost.workload.stacks import published_layouts


def test_published_layouts_are_the_csv_rows():
    # one truth: hardware/published_layouts.json is generated from the two CSV files and agrees with them
    runs = {r["id"]: r for r in load_preset_file("published_layouts.json")["runs"]}
    rows = list(csv.DictReader((DATA / "published_runs.csv").open())) \
        + list(csv.DictReader((DATA / "published_moe_runs.csv").open()))
    assert len(runs) == len(rows)
    for row in rows:
        got = runs[row["id"]]
        for key in ("model", "system", "stack", "precision", "recompute", "source"):
            assert got[key] == row[key], (row["id"], key)
        for key in ("gpus", "seq", "global_batch", "tp", "pp", "vp", "cp", "ep", "zero", "micro_batch"):
            assert got[key] == int(row[key]), (row["id"], key)
        assert got["sequence_parallel"] == (row["sequence_parallel"] == "1")
        if row.get("etp"):
            assert got["etp"] == int(row["etp"])
    # NeMo 24.09's Llama 3 70B on 64 GPUs, batch 128 (published_runs.csv nemo-llama3-70b): TP 4 PP 4 CP 2 VP 5
    (nemo,) = [r for r in published_layouts("llama3-70b", 64, 8192, 128) if r.id == "nemo-llama3-70b"]
    assert (nemo.tp, nemo.pp, nemo.cp, nemo.vp, nemo.zero, nemo.micro_batch) == (4, 4, 2, 5, 1, 1)
    assert published_layouts("llama3-70b", 64, 8192, 96) == ()


def test_every_published_layout_runs_on_the_stack_release_it_names():
    # the stack rules (hardware/stacks.json layouts) must admit what the runs really ran: a rule that refused one
    # would be contradicted by its own source (Megatron-LM of 2021 running ZeRO-1, torchtitan-0.0 accumulating...)
    from commcost.parallel.layout import Layout
    from commcost.workload.stacks import KNOWN_STACKS, layout_refusal
    named = [r for r in load_preset_file("published_layouts.json")["runs"] if r["stack"] in KNOWN_STACKS]
    assert len(named) > 150 and {r["stack"] for r in named} >= {"megatron-2021", "megatron-2022", "megatron-2024",
                                                                "nemo-2024", "torchtitan-0.0", "llm-foundry-2023"}
    for r in named:
        L = Layout(dp=r["gpus"] // (r["tp"] * r["pp"] * r["cp"]), tp=r["tp"], pp=r["pp"], vp=r["vp"], cp=r["cp"],
                   ep=r["ep"], zero=r["zero"], sequence_parallel=r["sequence_parallel"], recompute=r["recompute"],
                   micro_batch=r["micro_batch"], global_batch=r["global_batch"])
        assert layout_refusal(r["stack"], L) is None, r["id"]


ARGV = ["search", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "64", "--seq", "8192",
        "--top", "2", "--stack", "nemo-2024", "--tp-comm-overlap"]
"""NeMo 24.09's release (nemo-2024): of the two published llama3-70b layouts on 64 GPUs at batch 128, search
prefers the one run on its stack (nemo-llama3-70b; mb-h100-llama3-70b ran on today's nemo)."""


def test_search_shows_the_published_layout_and_the_gap(capsys):
    assert main([*ARGV, "--global-batch", "128", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    pub, best = d["published"], d["results"][0]
    assert pub["id"] == "nemo-llama3-70b" and pub["stack"] == "nemo-2024"   # NeMo 24.09: a past release of nemo
    # gap = published step / best step - 1, from the printed steps
    assert pub["gap"] == pytest.approx(pub["step_s"] / best["step_s"] - 1, rel=1e-12)
    assert pub["gap_upper"] == pytest.approx(pub["robust_step_s"] / best["robust_step_s"] - 1, rel=1e-12)
    # its command reproduces its step, with the published layout's flags
    assert main(pub["plan_command"].split()[1:] + ["--json"]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["step_s"] == pub["step_s"] and p["memory"]["total_bytes"] == pub["memory_total_bytes"]
    assert (p["layout"]["tp"], p["layout"]["pp"], p["layout"]["cp"], p["layout"]["vp"]) == (4, 4, 2, 5)
    # the published layout is never ahead of the best by more than the ranking's robustness allows:
    # if its nominal step is shorter, the best wins at the band's upper edge or on memory headroom
    if pub["gap"] < 0:
        assert pub["gap_upper"] >= 0 or pub["memory_fragile"]
    # the text says it
    assert main([*ARGV, "--global-batch", "128"]) == 0
    text = capsys.readouterr().out
    assert "published layout (nemo-llama3-70b, nemo-2024 on dgx-h100)" in text and "source: NeMo 24.09" in text


def test_no_published_layout_is_null(capsys):
    assert main([*ARGV, "--global-batch", "96", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["published"] is None


def test_search_states_the_gain_against_the_published_measurement(capsys):
    # MaxText's Llama 3 70B on 256 H100 at batch 512 (published_runs.csv dgxc-maxtext-llama3-70b-bf16-256) measured
    # 15.444 s a step (its metric is step_s): the gain a user can count on is against that, not against its prediction
    assert main(["search", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "256", "--seq", "8192",
                 "--global-batch", "512", "--top", "1", "--no-progress", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    pub, best = d["published"], d["results"][0]
    assert pub["id"] == "dgxc-maxtext-llama3-70b-bf16-256"
    assert pub["measured_step_s"] == pytest.approx(15.444, rel=1e-12)
    # gap_measured = measured / best's predicted step - 1
    assert pub["gap_measured"] == pytest.approx(15.444 / best["step_s"] - 1, rel=1e-12)


def test_measured_step_of_a_tokens_per_second_row():
    # a row published as tokens/s/GPU: step = B s / (tokens/s/GPU x W) (tests/data/SOURCES.md)
    row = next(r for r in csv.DictReader((DATA / "published_runs.csv").open())
               if r["metric"] == "tokens_per_s_per_gpu")
    (got,) = [r for r in published_layouts(row["model"], int(row["gpus"]), int(row["seq"]), int(row["global_batch"]))
              if r.id == row["id"]]
    B, s, W, x = int(row["global_batch"]), int(row["seq"]), int(row["gpus"]), float(row["value"])
    assert got.measured_step_s == pytest.approx(B * s / (x * W), rel=1e-12)
