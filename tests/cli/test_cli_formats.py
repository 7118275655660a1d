"""--hf-config and --from on the command line: every shipped config plans, the layout a file states is the
JSON layout, flags beside --from override it and are reported, refusals are one line and exit 2."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, run_commcost

HF = ROOT / "tests" / "data" / "hf_configs"
JOBS = ROOT / "tests" / "data" / "framework_configs"


@pytest.mark.parametrize("name,params", [("llama-3.1-8b", 8_030_261_248), ("mixtral-8x7b", 46_702_792_704),
                                         ("qwen3-30b-a3b", 30_532_122_624), ("deepseek-v3", 671_026_404_352),
                                         ("gpt-oss-20b", 20_914_757_184)])
def test_plan_hf_config_runs_with_the_transformers_count(name, params):
    # params: what transformers 4.57.6 counts building each file on the meta device
    # (tests/formats/test_hf_config.py builds them); DeepSeek-V3 without its MTP module
    r = run_commcost("plan", "--hf-config", str(HF / f"{name}.json"), "--seq", "4096", "--system", "dgx-h100",
                     "--gpus", "64", "--global-batch", "256", "--zero", "3", "--recompute", "full", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["params"] == params


def test_hf_config_refusals():
    r = run_commcost("plan", "--hf-config", str(HF / "llama-3.1-8b.json"), "--system", "dgx-h100", "--gpus", "8",
                     "--global-batch", "8")
    assert r.returncode == 2 and "needs --seq" in r.stderr and len(r.stderr.splitlines()) == 1
    r = run_commcost("plan", "--hf-config", str(HF / "llama-3.1-8b.json"), "--model", "llama2-7b", "--seq", "4096",
                     "--system", "dgx-h100", "--gpus", "8", "--global-batch", "8")
    assert r.returncode == 2 and "drop --model" in r.stderr


def test_budget_and_timeline_take_hf_config():
    r = run_commcost("budget", "--hf-config", str(HF / "llama-3.1-8b.json"), "--system", "dgx-h100", "--nodes", "2",
                     "--step-ms", "1000", "--json")
    assert r.returncode == 0, r.stderr
    r = run_commcost("timeline", "--hf-config", str(HF / "llama-3.1-8b.json"), "--seq", "8192", "--system",
                     "dgx-h100", "--nodes", "2", "--step-ms", "1000", "--json")
    assert r.returncode == 0, r.stderr
    r = run_commcost("timeline", "--hf-config", str(HF / "mixtral-8x7b.json"), "--seq", "8192", "--system",
                     "dgx-h100", "--nodes", "2", "--step-ms", "1000")
    assert r.returncode == 2 and "not a plain dense transformer" in r.stderr


def test_plan_from_torchtitan_gives_the_files_layout():
    r = run_commcost("plan", "--from", str(JOBS / "torchtitan_llama3_8b.toml"), "--system", "dgx-h100", "--gpus", "64",
                     "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    # data_parallel_shard_degree -1 on 64 GPUs: FSDP over 64; local_batch_size 1, global 1 x 64; seq_len 8192
    assert {k: d["layout"][k] for k in ("dp", "tp", "pp", "zero", "micro_batch", "global_batch", "recompute")} == \
        {"dp": 64, "tp": 1, "pp": 1, "zero": 3, "micro_batch": 1, "global_batch": 64, "recompute": "selective"}
    assert d["seq"] == 8192 and d["model"] == "llama3.1-8b" and d["from"]["framework"] == "torchtitan"


def test_plan_from_megatron_gives_the_files_layout_and_flags_override():
    r = run_commcost("plan", "--from", str(JOBS / "megatron_llama3_70b.args"), "--system", "dgx-h100", "--gpus",
                     "1024", "--micro-batch", "2", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    # TP 8, PP 4, 80 / (4 x 5) = vp 4, dp 1024 / 32 = 32, distributed optimizer = ZeRO-1
    assert {k: d["layout"][k] for k in ("dp", "tp", "pp", "vp", "zero", "sequence_parallel", "recompute",
                                        "global_batch", "micro_batch")} == \
        {"dp": 32, "tp": 8, "pp": 4, "vp": 4, "zero": 1, "sequence_parallel": True, "recompute": "selective",
         "global_batch": 1024, "micro_batch": 2}
    assert d["seq"] == 8192 and d["from"]["overrides"] == ["--micro-batch 2 (the file: 1)"]
    assert "overridden by the command line: --micro-batch 2" in r.stderr


def test_from_refusals(tmp_path):
    r = run_commcost("plan", "--from", str(tmp_path / "none.toml"), "--system", "dgx-h100", "--gpus", "8")
    assert r.returncode == 2 and "no such file" in r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[parallelism\n")
    r = run_commcost("plan", "--from", str(bad), "--system", "dgx-h100", "--gpus", "8")
    assert r.returncode == 2 and "not TOML" in r.stderr and "Traceback" not in r.stderr


def test_search_from_takes_the_model_and_batch_and_explores_the_layout():
    r = run_commcost("search", "--from", str(JOBS / "torchtitan_llama3_8b.toml"), "--system", "dgx-h100", "--gpus",
                     "64", "--global-batch", "128", "--top", "2", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    # the file's model and seq_len; --global-batch typed beside it wins (the file's default would be 64)
    assert (d["model"], d["seq"], d["global_batch"], d["stack"]) == ("llama3.1-8b", 8192, 128, "torchtitan")
    assert "search explores the layout" in r.stderr
