"""Peak memory against published runs (tests/data/published_runs.csv, column ``peak_memory_gib``): the middle of
plan's peak-reserved range against torch's ``max_memory_reserved`` where the source printed it, the middle of its
device range against the card's used memory where the source printed nvidia-smi's figure. The full table is
``python benchmarks/plan_accuracy.py`` (section PEAK MEMORY); this holds its figures under bounds."""

from __future__ import annotations

import csv
import statistics
import sys

import pytest

from conftest import ROOT

from commcost.analyses.plan.plan import plan_memory

sys.path.insert(0, str(ROOT / "benchmarks"))
import plan_accuracy  # noqa: E402

GIB = 2**30


def _reserved_rows():
    return [r for r in csv.DictReader(plan_accuracy.DATA.open()) if r["memory_stat"] == "reserved"]


def test_peak_reserved_memory_on_published_runs():
    errs, verdicts = [], []
    for row in _reserved_rows():
        inp, _ = plan_accuracy.inputs(row)
        m = plan_memory(inp)
        lo, hi = m.reserved_bytes
        errs.append(((lo + hi) / 2 / GIB - float(row["peak_memory_gib"])) / float(row["peak_memory_gib"]))
        verdicts.append(m.verdict)
    a = sorted(abs(e) for e in errs)
    assert len(a) == 27
    # measured 4.4% median and 15.2% p90 (the 25th of 27) when written; the bound is 10%
    assert statistics.median(a) <= 0.10
    assert a[24] <= 0.20
    # the signed median stays small (-1.7% when written: 20 of 27 rows a little under)
    assert abs(statistics.median(errs)) <= 0.05
    # every one of these runs ran: none is called "does not fit"
    assert "does not fit" not in verdicts


def test_runs_that_offload_activations_fit():
    # published_runs.csv column cpu_offload_layers: the Megatron-Bridge GB200/GB300 Llama 3 70B recipes offload
    # 40 and 20 of 80 layers' activations; without the offload both read "does not fit" (303 GiB allocated)
    rows = [r for r in csv.DictReader(plan_accuracy.DATA.open()) if r.get("cpu_offload_layers")]
    assert sorted(r["id"] for r in rows) == ["mb-gb200-llama3-70b", "mb-gb300-llama3-70b"]
    for row in rows:
        inp, _ = plan_accuracy.inputs(row)
        assert inp.cpu_offload_layers == int(row["cpu_offload_layers"])
        assert plan_memory(inp).verdict != "does not fit", row["id"]


def test_device_memory_rows_compare_with_what_the_card_holds():
    # memory_stat device: the card's used memory as nvidia-smi prints it (FlagPerf's NVIDIA monitor), compared with
    # the middle of plan's device range (reserved + CUDA context + NCCL buffers), not with the reserved range
    rows = [r for r in csv.DictReader(plan_accuracy.DATA.open()) if r["memory_stat"] == "device"]
    assert len(rows) == 18 and all(r["id"].startswith("fp-") for r in rows)
    errs = []
    for row in rows:
        inp, _ = plan_accuracy.inputs(row)
        m = plan_memory(inp)
        lo, hi = m.device_bytes
        assert m.verdict != "does not fit", row["id"]
        # the device range sits above the reserved one by the CUDA context (0.5 and 1 GiB) and the layout's NCCL
        # buffers (one communicator per parallel group: at least the low end of one, 147 MiB)
        assert lo - m.reserved_bytes[0] == pytest.approx(0.5 * GIB + m.nccl_bytes[0])
        assert hi - m.reserved_bytes[1] == pytest.approx(1.0 * GIB + m.nccl_bytes[1])
        assert m.nccl_bytes[1] > m.nccl_bytes[0] >= 16 * (4 * 2**20 + 4_915_200 + 524_288)
        errs.append(((lo + hi) / 2 / GIB - float(row["peak_memory_gib"])) / float(row["peak_memory_gib"]))
    # measured 14.5% median |err| when written with a flat 0.25-2 GiB for NCCL (18.6% against the reserved range
    # before the rows were read as device memory and the deepspeed stack's eager norm and rotary were counted);
    # 10.7% with NCCL's buffers per communicator (Megatron's two extra groups), NVLS on the H100/H800 rows, TE's
    # fp8 weight cache and Megatron's 10-byte loss; 10.3% with FlagScale's two rows as megatron-2023 (eager norms)
    # 9.8% with FlagPerf's Llama 3 rows priced with the model their scripts launch (Megatron's defaults: dropout 0.1,
    # learned positions, tied head), learned positions whole on every TP rank and fp8's bf16 attention output
    assert statistics.median(abs(e) for e in errs) <= 0.11
    # under on balance (16 of 18 when written, 14 of 18 now): the card holds what plan does not count
    assert statistics.median(errs) < 0


def test_transformer_engine_fp8_rows_fit():
    # AMD's train_fsdp.py runs Llama 3.1 8B in fp8 over TE TransformerLayers (stack amd-fsdp-te-2025): MI325X at
    # batch 5 x 8,192 or 10 x 4,096 (40,960 tokens a rank). Activations 32 layers x 120,960 bytes a token
    # (tests/workload/test_memory_formulas.py) + the loss's 4 bytes a token and vocabulary entry:
    # 40,960 x (32 x 120,960 + 4 x 128,256) = 179,558,154,240 = 167.23 GiB, on a 238.4 GiB card. Priced with the fsdp
    # stack's eager layer (168,064 bytes a token) they read "does not fit" (224.7 GiB of activations)
    rows = [r for r in csv.DictReader(plan_accuracy.DATA.open()) if r["stack"] == "amd-fsdp-te-2025"]
    assert sorted(r["id"] for r in rows) == ["amdpt-mi300x-llama31-8b-fp8-4k", "amdpt-mi300x-llama31-8b-fp8-8k",
                                             "amdpt-mi325x-llama31-8b-fp8-4k", "amdpt-mi325x-llama31-8b-fp8-8k"]
    for row in rows:
        inp, _ = plan_accuracy.inputs(row)
        m = plan_memory(inp)
        if row["id"].startswith("amdpt-mi325x"):
            assert m.activations_bytes == 179_558_154_240, row["id"]
        assert m.verdict != "does not fit", row["id"]


def test_no_run_that_ran_is_called_out_of_memory():
    # every published run (dense and MoE; JAX/XLA runs aside, priced with a PyTorch stack's memory) ran: the verdict
    # reads the range, so none may have even its low end over the card
    rows = list(csv.DictReader(plan_accuracy.DATA.open())) + list(csv.DictReader(plan_accuracy.MOE_DATA.open()))
    # InternLM's multi-node runs record their hybrid ZeRO-1 by its traffic (zero 0): their verdict describes another
    # placement of the optimizer states, so they are left out (plan_accuracy.MEMORY_NOT_REPRESENTED, 20 runs)
    ran = [r for r in rows if r["stack"] not in plan_accuracy.NO_STACK
           and r["id"] not in plan_accuracy.MEMORY_NOT_REPRESENTED]
    assert len(ran) == 243     # 263 runs on PyTorch stacks (dense and MoE), less the 20 above
    oom = [r["id"] for r in ran if plan_memory(plan_accuracy.inputs(r)[0]).verdict == "does not fit"]
    assert oom == []
