"""Framework config files -> Job: what each shipped example states, the framework defaults said, the
deferred torchtitan quantities resolved by hand, the YAML subset and the refusals."""

from __future__ import annotations

import pytest

from commcost.core.errors import InputError
from commcost.formats.job import resolve_job
from commcost.formats.readers import guess_framework, read_job
from commcost.formats.yaml_subset import loads
from conftest import ROOT

DATA = ROOT / "tests" / "data" / "framework_configs"


def test_torchtitan_llama3_8b():
    job = read_job(str(DATA / "torchtitan_llama3_8b.toml"))
    assert job.framework == "torchtitan"
    assert job.values["model"] == "llama3.1-8b" and job.values["seq"] == 8192
    assert job.values["recompute"] == "selective" and job.values["stack"] == "torchtitan"
    # data_parallel_shard_degree -1 on 64 GPUs: 64 / (1 x 1 x 1 x 1) = 64 shards, FSDP; global batch -1:
    # local_batch_size 1 x dp 64 = 64, said as the default
    values, defaults = resolve_job(job, gpus=64, layers=32)
    assert (values["dp"], values["zero"], values["micro_batch"], values["global_batch"]) == (64, 3, 1, 64)
    assert "hsdp" not in values
    assert any(d[0] == "global_batch" for d in defaults)
    with pytest.raises(InputError, match="give --gpus"):
        resolve_job(job, gpus=None, layers=32)


def test_torchtitan_hsdp_and_pipeline(tmp_path):
    f = tmp_path / "j.toml"
    f.write_text("[parallelism]\ndata_parallel_replicate_degree = 2\ndata_parallel_shard_degree = 8\n"
                 "tensor_parallel_degree = 2\npipeline_parallel_degree = 2\ncontext_parallel_degree = 2\n"
                 "pipeline_parallel_microbatch_size = 2\npipeline_parallel_schedule = \"Interleaved1F1B\"\n"
                 "pipeline_parallel_layers_per_stage = 4\n[training]\nlocal_batch_size = 16\n"
                 "[activation_checkpoint]\nmode = \"full\"\n")
    values, _ = resolve_job(read_job(str(f)), gpus=2 * 8 * 2 * 2 * 2, layers=32)
    # dp = 2 x 8 = 16; HSDP shards over dp_shard x cp = 8 x 2 = 16; vp = 32 / (2 x 4) = 4; PP micro-batch 2;
    # global batch 16 x 16 = 256
    assert (values["dp"], values["zero"], values["hsdp"], values["vp"]) == (16, 3, 16, 4)
    assert (values["micro_batch"], values["global_batch"], values["recompute"]) == (2, 256, "full")


def test_torchtitan_default_selective_option_is_layer_checkpointing(tmp_path):
    f = tmp_path / "j.toml"
    f.write_text("[training]\nseq_len = 4096\n")
    job = read_job(str(f))
    # torchtitan's defaults: mode selective, selective_ac_option "2" (every 2nd layer): priced as full, said
    assert job.values["recompute"] == "full"
    assert any("selective_ac_option = 2" in u for u in job.unread)
    assert any(d[0] == "recompute" for d in job.defaults)


def test_megatron_llama3_70b():
    job = read_job(str(DATA / "megatron_llama3_70b.args"))
    v = job.values
    assert (v["tp"], v["pp"], v["sequence_parallel"], v["zero"], v["recompute"]) == (8, 4, True, 1, "selective")
    assert (v["micro_batch"], v["global_batch"], v["seq"], v["precision"]) == (1, 1024, 8192, "bf16")
    assert (v["layers"], v["hidden"], v["heads"], v["kv_heads"], v["gated_mlp"]) == (80, 8192, 64, 8, True)
    # 80 layers / (pp 4 x 5 layers per virtual stage) = vp 4
    assert resolve_job(job, gpus=1024, layers=80)[0]["vp"] == 4
    assert job.unread == ()


def test_megatron_defaults_and_unread(tmp_path):
    f = tmp_path / "args.txt"
    f.write_text("--micro-batch-size 2 --seq-length 4096 --tensor-model-parallel-size=2 --cpu-offloading "
                 "--moe-shared-expert-overlap  # a comment\n")
    job = read_job(str(f))
    assert job.values["tp"] == 2 and job.values["precision"] == "bf16"
    assert any(d[0] == "precision" and "fp32" in d[2] for d in job.defaults)
    assert "--moe-shared-expert-overlap" in job.unread
    # the global batch defaults to micro-batch x dp: 2 x 16 / 2 = 16
    assert resolve_job(job, gpus=16, layers=None)[0]["global_batch"] == 16
    f.write_text("--tensor-model-parallel-size $TP\n")
    with pytest.raises(InputError, match="needs a number"):
        read_job(str(f))


def test_deepspeed_and_nemo():
    ds = read_job(str(DATA / "deepspeed_zero3.json"))
    assert (ds.values["zero"], ds.values["micro_batch"], ds.values["global_batch"]) == (3, 2, 512)
    nemo = read_job(str(DATA / "nemo_llama2_7b.yaml"))
    # trainer.num_nodes 16 x devices 8 = 128 GPUs; distributed_fused_adam is the distributed optimizer
    assert (nemo.values["gpus"], nemo.values["tp"], nemo.values["zero"], nemo.values["seq"]) == (128, 4, 1, 4096)
    assert nemo.values["sequence_parallel"] is True and nemo.values["global_batch"] == 2048


def test_guess_and_yaml_subset():
    assert [guess_framework(p) for p in ("a.toml", "a.json", "a.yaml", "a.sh")] == \
        ["torchtitan", "deepspeed", "nemo", "megatron"]
    assert loads("a:\n  b: 1\n  c: [1, x]\nd: 'q # not a comment'  # comment\ne: ~\n") == \
        {"a": {"b": 1, "c": [1, "x"]}, "d": "q # not a comment", "e": None}
    with pytest.raises(InputError, match="line 1"):
        loads("a: &anchor 1\n")
    with pytest.raises(InputError, match="line 2"):
        loads("a:\n\tb: 1\n")


def test_deepspeed_batch_must_add_up():
    job = read_job(str(DATA / "deepspeed_zero3.json"))
    # 512 = micro 2 x accumulation 4 x dp 64
    assert resolve_job(job, gpus=64, layers=None)[0]["global_batch"] == 512
    with pytest.raises(InputError, match=r"2 x 4 x 32 = 256 on 32 GPUs"):
        resolve_job(job, gpus=32, layers=None)
