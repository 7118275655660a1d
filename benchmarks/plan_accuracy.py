"""How close ``commcost plan`` comes to published training runs (tests/data/published_runs.csv).

For every row: the published step time (from the metric the source printed: see tests/data/SOURCES.md)
against the plan's step. **The headline is out of sample** (benchmarks/_validation.py), printed first and in
this order: leave-one-project-out (each project's runs, a framework's or a paper's documents together as
tests/data/run_projects.csv says, predicted with the sustained fractions fitted on the other projects; a past
release serving that project alone priced as its base), a time split (fitted on the runs published before
2024-09, the later ones scored) and no stack named (each held-out run as a new user plans it: ``--stack auto``,
the GPU's default preset, no recipe flags, so the implied stack's recipe defaults of
:mod:`commcost.workload.recipes`, as ``commcost plan`` assumes them), each as median |error|, p90, median signed
error and the share too fast, with the runs that took a fraction fitted on other GPUs' or stacks' runs said. Then the fitted fractions, memory, the MoE rows and every row; last the figures IN SAMPLE (the shipped
constants, fitted on these same runs: the ``split`` column no longer keeps any run out of a fit, and its
``new`` rows print as ``added``), and "calibrated from one run": each row predicted with the efficiency fitted
(:func:`commcost.calibrate.efficiency.fit_efficiency`) on another run of the same model family and GPU.

NeMo and Megatron-Bridge rows (``stack`` nemo) are planned with ``tp_comm_overlap`` (their performance
recipes turn Transformer Engine's TP communication overlap on), and so are rows whose id says
``asynctp`` (torchtitan's async TP); the Megatron-LM papers' rows and the others without.

MoE rows are planned as their recipes run them: the Megatron-Bridge and NeMo performance recipes set
``expert_tensor_parallel_size = 1`` (Megatron-Bridge ``scripts/performance`` workload base configs) and
force-balance the routing (load imbalance 1); the GB200/GB300 rows dispatch inside one NVLink domain
(HybridEP, priced as the NCCL all-to-all there), the H100 rows as :data:`RECIPE_MOE_BY_ROW` says (the
1F1B all-to-all overlap, DeepEP for DeepSeek-V3), each with the recipe file that sets it. They are
reported apart (signed, share too fast): no constant is fitted on MoE rows (the sustained fractions come
from the dense rows alone); their out-of-sample line is the MoE leave-one-project-out (each MoE row
predicted with the fractions fitted on the other projects' dense rows); the same rows under Megatron's
defaults (expert TP = t, NCCL, no overlap) are shown beside.

Dense rows take the recipe's DP bucket size where the recipe sets one (:data:`RECIPE_BUCKET_BY_ROW`, the MLPerf
runs' ``optim.bucket_size``), every other row DDP's default; rows whose pipeline split counts the embedding and the
loss as layers are in :data:`SPLIT_COUNTS_ENDS`, each with the file or paper that says so.

Rows with ``split`` = ``new`` were added after the first fit; they are in every fit now (in sample), print
as ``added`` and never serve as the donor of a tuning or held-out row in the calibrated column.

``--fit`` prints the sustained fractions fitted on every dense row (what kernels.json and stacks.json ship;
a test requires them equal); ``--interval`` the prediction interval's ratios from the leave-one-project-out
(what hardware/step_interval.json ships); ``--write-rows`` writes every run's signed error in sample and under
each out-of-sample figure to benchmarks/plan_accuracy_rows.csv (committed: rerun it with a change that moves
a run). Usage: python benchmarks/plan_accuracy.py [--fit | --interval | --write-rows]
"""

from __future__ import annotations

import csv
import os
import math
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from commcost.calibrate.efficiency import fit_efficiency, model_family
from commcost.comm.model import FabricModel
from commcost.workload.compute import peak_flops_per_s, precision_class
from commcost.core.errors import InputError
from commcost.parallel.layout import Layout
from commcost.analyses.plan.plan import PlanInputs, plan
from commcost.hardware.registry import systems
from commcost.comm.systems import system_group
from commcost.workload.stacks import KNOWN_STACKS, stack_family
from commcost.workload.transformer import model_spec

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


NEMO = tuple(s for s in KNOWN_STACKS[1:] if stack_family(s) == "nemo")
"""NeMo's releases: their performance recipes run TE's TP communication overlap (stacks.json nemo)."""
DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "published_runs.csv"
MOE_DATA = DATA.with_name("published_moe_runs.csv")
"""MoE runs whose source states the dispatcher, expert TP and overlap (columns ``etp a2a moe_overlap expert_load``)."""
A100_PEAK = 312e12
NO_STACK = ("jax",)
"""``stack`` values of runs on a framework commcost has no stack for (MaxText and Pax on JAX/XLA): predicted
as ``--stack auto``, fitted into no fraction, and reported on a line of their own beside the headline, which
covers the PyTorch stacks that ``--stack`` names (and ``other``: PyTorch stacks without an entry)."""


def published_step_s(row: dict) -> float:
    """The step time the row's metric implies (tests/data/SOURCES.md)."""
    spec = model_spec(row["model"])
    B, s, W = int(row["global_batch"]), int(row["seq"]), int(row["gpus"])
    l, h, V = spec.layers, spec.hidden, spec.vocab
    x = float(row["value"])
    if row["metric"] == "tflops_eq3":      # Narayanan et al. 2021 eq. 3
        return 96 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h)) / (x * 1e12 * W)
    if row["metric"] == "mfu_72":          # Korthikanti et al. 2022, model FLOPs without recomputation
        return 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h)) / (x * A100_PEAK * W)
    if row["metric"] == "tokens_per_s_per_gpu":
        return B * s / (x * W)
    if row["metric"] == "step_s":
        return x
    if row["metric"] == "mfu_6n":          # PaLM-style MFU: (6 N + 12 l h s) per token over the dense bf16 peak
        gpu = systems()[row["system"]]["gpu"]
        return B * s * (6 * spec.params + 12 * l * h * s) / (x * peak_flops_per_s(gpu, "bf16") * W)
    raise ValueError(row["metric"])


RECIPE_MOE = {"etp": 1}
"""The MoE settings of the Megatron-Bridge / NeMo recipes behind the MoE rows (module docstring)."""

_MB_QWEN3 = ("Megatron-Bridge v0.2.1 (the 25.11 container's scripts/performance): configs/qwen3/"
             "workload_base_configs.py")
RECIPE_MOE_BY_ROW = {
    "mb-h100-qwen3-30b": dict(etp=1, a2a="nccl", moe_overlap="1f1b", source=_MB_QWEN3 + " QWEN3_30B_A3B_H100_FP8_CS: "
                              "moe_a2a_overlap=True (1F1B all-to-all overlap), alltoall dispatcher"),
    "mb-h100-qwen3-235b": dict(etp=1, a2a="nccl", moe_overlap="1f1b", tp_comm_overlap=False,
                               source=_MB_QWEN3 + " QWEN3_235B_A22B_H100_FP8_CS: moe_a2a_overlap=True, alltoall "
                               "dispatcher; qwen3_llm_pretrain.py sets tp_comm_overlap=False for H100 235B"),
    "mb-h100-deepseekv3": dict(etp=1, a2a="deepep", moe_overlap="1f1b", recompute_modules=("mla_up_proj", "mlp"),
                               source="Megatron-Bridge v0.1.0rc4 (25.09) scripts/performance/run_script.py: DeepSeek-V3 "
                               "on H100 enables DeepEP and the 1F1B all-to-all overlap; scripts/performance/configs/"
                               "deepseek/workload_base_configs.py DEEPSEEK_V3_H100_BASE_CONFIG: recompute_modules="
                               "['mla_up_proj', 'mlp']"),
}
_HYBRIDEP = ("Megatron-Bridge v0.2.1 scripts/performance/configs/{qwen3,deepseek}/workload_base_configs.py: every "
             "GB200/GB300 config sets moe_flex_dispatcher_backend='hybridep' (the flex dispatcher: one copy per "
             "destination rank, no sort by local expert)")
for _id in ("mb-gb300-qwen3-30b", "mb-gb200-qwen3-30b", "mb-gb300-qwen3-235b", "mb-gb200-qwen3-235b",
            "mb-gb300-deepseekv3", "mb-gb200-deepseekv3"):
    RECIPE_MOE_BY_ROW[_id] = dict(etp=1, a2a="deepep", moe_overlap="none", source=_HYBRIDEP)
RECIPE_MOE_BY_ROW["mb-gb200-deepseekv3"] = dict(
    RECIPE_MOE_BY_ROW["mb-gb200-deepseekv3"], recompute_modules=("mla_up_proj",),
    source=_HYBRIDEP + "; configs/deepseek/workload_base_configs.py DEEPSEEK_V3_GB200_BF16_BASE_CONFIG: "
    "recompute_modules=['mla_up_proj']")
"""Rows of published_runs.csv whose recipe departs from :data:`RECIPE_MOE`, with the recipe file that says so
(inputs of the run as it ran, not fitted; HybridEP inside one NVL72 domain is priced as the node-aware
dispatch inside one node, ``--a2a deepep``)."""


_LLAMA3_SPLIT = ("Llama Team 2024 (arXiv 2407.21783) Section 3.3.2: 'To balance the pipeline, we reduce one "
                 "Transformer layer each from the first and the last stages'")
SPLIT_COUNTS_ENDS = {
    "bloom-176b-384": "bigscience-workshop/bigscience train/tr11-176B-ml/README.md: --pp-partition-method "
                      "'type:transformer|embedding' (bigscience-workshop/Megatron-DeepSpeed megatron/model/"
                      "gpt_model.py GPTModelPipe: the embedding layers counted with the transformer blocks in "
                      "DeepSpeed's partition)",
    "llama3-405b-8k-8192": _LLAMA3_SPLIT, "llama3-405b-8k-16384": _LLAMA3_SPLIT,
    "llama3-405b-128k-16384": _LLAMA3_SPLIT,
}
_MLPERF_ASYM = ("MLPerf Training v5.1 llama31_405b config (ASYM_PP_EMBED=True, ASYM_PP_LOSS=True: conf/custom.yaml "
                "account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split, passed to NeMo's "
                "MegatronStrategy in pretrain.py)")
for _id in ("mlperf-uf-b200-llama31-405b-256", "mlperf-uf-b200-llama31-405b-448",
            "mlperf-nebius-h200-llama31-405b-512", "mlperf-nebius-h200-llama31-405b-1024"):
    SPLIT_COUNTS_ENDS[_id] = _MLPERF_ASYM
"""Rows whose pipeline split counts the embedding and the head as a layer each (``Layout.split_counts_ends``), with
the recipe or paper that says so."""

_MEGATRON_DEFAULTS = ("FlagOpen/FlagPerf training/benchmarks/llama3_{8B,70B}/megatron/pretrain_llama3.sh pass neither "
                      "--hidden-dropout nor --attention-dropout, nor --position-embedding-type rope, nor "
                      "--untie-embeddings-and-output-weights, so NVIDIA/Megatron-LM core_v0.6.0 megatron/training/"
                      "arguments.py's defaults apply: hidden_dropout and attention_dropout 0.1 (the hidden dropout "
                      "after the embedding and in both bias-dropout-adds, megatron/core/fusions/fused_bias_dropout.py), "
                      "position_embedding_type learned_absolute over --max-position-embeddings 8192, and the output "
                      "layer sharing the word embeddings")
RUN_MODEL_BY_ROW = {_id: (dict(dropout=True, max_positions=8192, tied_embeddings=True), _MEGATRON_DEFAULTS) for _id in (
    "fp-l3-8b-a800-pp2dp4", "fp-l3-8b-h100-tp2dp4", "fp-l3-8b-h100-tp2dp4-fp8", "fp-l3-8b-h100-tp2dp8",
    "fp-l3-8b-h100-tp2dp8-fp8", "fp-l3-8b-a800-pp4dp2", "fp-l3-8b-a800-pp2dp2tp2", "fp-l3-8b-a800-pp2tp4",
    "fp-l3-8b-a800-pp8", "fp-l3-8b-a800-tp8", "fp-l3-8b-a800-pp4tp2", "fp-l3-70b-h100-64")}
"""Rows whose launch script trains a model that departs from their preset (``TransformerSpec`` fields: dropout's
saved masks and traffic, a learned position embedding instead of rotary, a tied head), with the script that says
so (run inputs, not fitted)."""

_MLPERF_BUCKET = ("mlcommons/training_results_v5.1 {folder} conf/custom.yaml optim.bucket_size (Megatron-Core "
                  "DistributedDataParallelConfig.bucket_size: parameters per bucket) {params:,}{how}; pretrain.py "
                  "grad_reduce_in_fp32=False: 2 bytes per gradient, {mib} MiB per bucket")
RECIPE_BUCKET_BY_ROW = {
    "mlperf-uf-b200-llama31-8b-64": (134217728 * 2, _MLPERF_BUCKET.format(
        folder="University-of-Florida/benchmarks/llama31_405b/implementations/b200_nemo", params=134217728,
        how=" (its default; config_common*.sh leave BUCKET_SIZE unset)", mib=256)),
    "mlperf-oci-b200-llama31-8b-64": (768000000 * 2, _MLPERF_BUCKET.format(
        folder="Oracle/benchmarks/llama31_8b", params=768000000, how=" (config_common_8b.sh BUCKET_SIZE=768000000)",
        mib="1,464.8")),
}
for _id in ("mlperf-uf-b200-llama31-405b-256", "mlperf-uf-b200-llama31-405b-448"):
    RECIPE_BUCKET_BY_ROW[_id] = RECIPE_BUCKET_BY_ROW["mlperf-uf-b200-llama31-8b-64"]
"""Rows whose recipe sets the data-parallel bucket size (``PlanInputs.bucket_cap_bytes``; every other row takes
DDP's default), with the file that sets it. Left at the default: the Cisco and Nebius MLPerf rows, whose
custom.yaml sets 64 and 200 parameters per bucket (a bucket per tensor), which the uniform bucket layout cannot
say."""


def inputs(row: dict, moe: dict | None = None) -> tuple[PlanInputs, FabricModel]:
    """The row's plan inputs; MoE rows with the recipe's settings (``moe``, default :data:`RECIPE_MOE`)."""
    spec = model_spec(row["model"])
    if row["id"] in RUN_MODEL_BY_ROW:
        spec = replace(spec, **RUN_MODEL_BY_ROW[row["id"]][0])
    if moe is None:
        stated = {k: row[k] for k in ("etp", "a2a", "moe_overlap", "expert_load") if row.get(k)}
        moe = RECIPE_MOE if not stated else {"etp": int(stated["etp"]), "a2a": stated["a2a"],
                                              "moe_overlap": stated["moe_overlap"],
                                              "expert_load": float(stated["expert_load"])}
        if not stated and row["id"] in RECIPE_MOE_BY_ROW:
            moe = {k: v for k, v in RECIPE_MOE_BY_ROW[row["id"]].items() if k != "source"}
    moe = dict(moe) if spec.is_moe else {}
    W, tp, pp, cp, vp = (int(row[k]) for k in ("gpus", "tp", "pp", "cp", "vp"))
    pv = pp * vp
    ends = row["id"] in SPLIT_COUNTS_ENDS
    layout = Layout(dp=W // (tp * pp * cp), tp=tp, pp=pp, vp=vp, cp=cp, ep=int(row["ep"]), zero=int(row["zero"]),
                    sequence_parallel=row["sequence_parallel"] == "1", recompute=row["recompute"],
                    micro_batch=int(row["micro_batch"]), global_batch=int(row["global_batch"]),
                    uneven_pipeline=(spec.layers + 2 * ends) % pv != 0, split_counts_ends=ends, etp=moe.pop("etp", 0))
    sysp = systems()[row["system"]]
    G = int(sysp["gpus_per_node"])
    topo, _ = system_group(row["system"], nodes=-(-W // G))
    inp = PlanInputs(spec=spec, layout=layout, seq=int(row["seq"]), gpu=sysp["gpu"], gpus_per_node=G,
                     precision=row["precision"], flash_attention=row["flash_attention"] == "1",
                     tp_comm_overlap=moe.pop("tp_comm_overlap", (row["stack"] in NEMO or "asynctp" in row["id"]) and tp > 1),
                     stack=row["stack"] if row["stack"] in KNOWN_STACKS else "auto", compiled=row["compile"] == "1",
                     cpu_offload_layers=int(row.get("cpu_offload_layers") or 0),
                     bucket_cap_bytes=RECIPE_BUCKET_BY_ROW.get(row["id"], (None,))[0], **moe)
    return inp, FabricModel(topology=topo)


def p90(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, math.ceil(0.9 * len(xs)) - 1)]


def score_runs(*, out_of_sample: bool = True) -> tuple[list[dict], list[dict]]:
    """``(results, fits)``: every run planned with the shipped constants (``in_sample``: signed error), its
    project and date, every dense run's fitted fractions; with ``out_of_sample`` also the leave-one-project-out,
    time split and no-stack errors (benchmarks/_validation.py)."""
    import _validation as V

    rows = list(csv.DictReader(DATA.open())) + list(csv.DictReader(MOE_DATA.open()))
    results = []
    for row in rows:
        inp, model = inputs(row)
        measured = published_step_s(row)
        pr = plan(inp, model)
        try:
            eta = fit_efficiency(inp, model, measured)
        except InputError:
            eta = float("nan")
        results.append(dict(row=row, inp=inp, model=model, measured=measured, plan=pr, eta=eta,
                            err=abs(pr.step_s - measured) / measured, in_sample=(pr.step_s - measured) / measured))
    V.attach_projects(results)
    fits = fit_fractions(results)
    if out_of_sample:
        V.leave_one_project_out(results, fits)
        V.time_split(results, fits)
    return results, fits


def main(argv: list[str]) -> int:
    import _validation as V

    results, fits = score_runs(out_of_sample="--fit" not in argv)
    if "--fit" in argv:
        print_fractions(fits)
        return 0
    V.print_headline(results)
    import scaling_series   # the error's trend with the GPU count (benchmarks/scaling_series.py)
    scaling_series.report(results, err="lopo", label="leave-one-project-out errors")
    if "--interval" in argv:   # what hardware/step_interval.json ships
        print(V.dumps_interval(results))
        return 0
    if "--write-rows" in argv:
        V.write_rows(results)
        print(f"every run's error written to {V.ROWS_CSV.name}")
    print_fractions(fits)
    memory_check(results)
    moe_apart(results)
    print(f"{'id':<34}{'split':<8}{'published':>11}{'plan':>10}{'err':>8}  {'eta fit':>7}  dominant non-compute term")
    for r in results:
        pr = r["plan"]
        terms = {"bubble": pr.pipeline_bubble_s, **{f"{d} comm": s for d, s in pr.exposed_by_dimension().items()}}
        dom = max(terms.items(), key=lambda kv: kv[1]) if terms else ("-", 0.0)
        print(f"{r['row']['id']:<33} {SPLIT_LABEL[r['row']['split']]:<8}{r['measured']:>10.3f}s{pr.step_s:>9.3f}s"
              f"{(pr.step_s - r['measured']) / r['measured']:>+8.1%}  {r['eta']:>7.3f}  {dom[0]} {dom[1] / pr.step_s:.0%}")
    # calibrated from one run of the same family and GPU
    for r in results:
        fam, gpu = model_family(r["row"]["model"]), r["inp"].gpu
        donors = [d for d in results if d is not r and model_family(d["row"]["model"]) == fam and d["inp"].gpu == gpu
                  and (d["row"]["split"] != "new" or r["row"]["split"] == "new")
                  and math.isfinite(d["eta"]) and precision_class(d["inp"].precision) == precision_class(r["inp"].precision)]
        donors.sort(key=lambda d: d["row"]["split"] != "tune")
        if donors:
            pc = plan(replace(r["inp"], efficiency=donors[0]["eta"]), r["model"])
            r["cal_err"] = abs(pc.step_s - r["measured"]) / r["measured"]
            r["donor"] = donors[0]["row"]["id"]
    print()
    print("IN SAMPLE: the shipped constants, fitted on these same dense runs (every dense run fits the sustained")
    print("fractions whatever its split; MoE runs fit none; 'added' = split new: added after the first fit, in it now)")
    print(f"{'set':<15}{'n':>4}{'median':>8}{'p90':>7}{'signed':>8}{'fast':>6}{'cal. n':>7}{'median':>8}{'p90':>7}")
    for split in ("tune", "holdout", "new"):
        for kind in ("dense", "moe"):
            sel = [r for r in results if r["row"]["split"] == split and r["inp"].spec.is_moe == (kind == "moe")]
            if not sel:
                continue
            s = V.summary([r["in_sample"] for r in sel])
            cal = [r["cal_err"] for r in sel if "cal_err" in r]
            cal_txt = f"{len(cal):>7}{statistics.median(cal):>8.1%}{p90(cal):>7.1%}" if cal else f"{0:>7}"
            print(f"{SPLIT_LABEL[split] + ' ' + kind:<15}{s['n']:>4}{s['median']:>8.1%}{s['p90']:>7.1%}"
                  f"{s['signed']:>+8.1%}{s['too_fast']:>6.0%}{cal_txt}")
    return 0


SPLIT_LABEL = {"tune": "tune", "holdout": "holdout", "new": "added"}
"""How the ``split`` column prints: ``new`` rows are no longer new to any fit (they fit the sustained fractions
like every other dense run), so they print as ``added``; only the out-of-sample headline predicts a run with
constants fitted without it."""


def fit_fractions(results: list[dict]) -> list[dict]:
    """Every dense run's sustained fraction (benchmarks/_sustained.py) under its stack and under ``--stack auto``
    as ``commcost plan`` prices it with no ``--stack`` (:func:`_validation.auto_inputs`: the implied stack's recipe
    TP overlap and bucket in place of the run's, the inputs ``auto_sustained`` prices)."""
    import _sustained as S
    import _validation as V
    from commcost.workload.stacks import resolve_stack

    fits = []
    for r in results:
        if r["inp"].spec.is_moe:
            continue
        u = S.row_fraction(r["inp"], r["model"], r["measured"])
        r["stack"] = resolve_stack(r["inp"].stack, r["inp"].layout)[0]
        if u is not None:   # and the fraction that makes --stack auto, its behaviour, reproduce the run
            auto = V.auto_inputs(r["inp"])[0]
            u_auto = u if auto == r["inp"] else S.row_fraction(auto, r["model"], r["measured"])
            fits.append(dict(gpu=r["inp"].gpu, stack=r["stack"], declared=r["row"]["stack"], u=u, u_auto=u_auto, r=r))
    S.restore()
    return fits


def print_fractions(fits: list[dict]) -> None:
    """The sustained fractions fitted on every dense run: what kernels.json and stacks.json ship."""
    import _sustained as S

    u_gpu, u_stack, fb = S.fit(fits)
    print("sustained fractions fitted on every dense row (kernels.json sustained, stacks.json sustained):")
    print("  u_gpu   " + ", ".join(f"{g} {u:.3f}" for g, u in sorted(u_gpu.items())) + f"; others {fb:.3f}")
    print("  u_stack " + ", ".join(f"{s} {u:.3f}" for s, u in sorted(u_stack.items(), key=str) if not isinstance(s, tuple)))
    print("  --stack auto (stacks.json auto_sustained) " + ", ".join(
        f"as {s[1]} {u:.3f}" for s, u in sorted(u_stack.items(), key=str) if isinstance(s, tuple)))
    print()


GIB = 2**30


MEMORY_NOT_REPRESENTED = frozenset(f"internlm-7b-{ac}-{g}-b{b}" for ac in ("ckpt", "nockpt") for g, b in (
    (16, 128), (32, 256), (64, 512), (128, 1024), (256, 2048), (512, 4096), (1024, 8192), (512, 2048), (1024, 2048),
    (1024, 4096)))
"""Runs whose optimizer-state placement the layout cannot state, so the plan's memory verdict does not describe them
(listed apart from "does not fit"): InternLM's zero1=8 on more than one node (HybridZeroOptimizer: the gradients
all-reduced over the data-parallel group, the optimizer states sharded over each node's 8 GPUs), recorded as zero 0
for its traffic (tests/data/published_runs.csv, their ``source``)."""


def memory_check(results: list[dict]) -> None:
    """Peak memory against the published figure (column ``peak_memory_gib``): the middle of the plan's
    peak-reserved range (:attr:`~commcost.workload.memory.MemoryBreakdown.reserved_bytes`) against torch's
    ``max_memory_reserved`` where the source printed it (``memory_stat`` reserved; headline); the middle of what
    the card holds (:attr:`~commcost.workload.memory.MemoryBreakdown.device_bytes`: reserved, CUDA context, NCCL
    buffers) against the card's used memory as nvidia-smi prints it (``memory_stat`` device); figures of unstated
    statistic apart; then every run that ran and is called "does not fit", and the MoE runs' memory apart (none
    published a peak; every one ran)."""
    rows = [r for r in results if r["row"].get("peak_memory_gib")]
    print(f"PEAK MEMORY ({len(rows)} runs with a published figure; plan = middle of the range of the same")
    print("statistic: reserved by torch, or on the device as nvidia-smi shows it):")
    print(f"  {'id':<40}{'stat':>9}{'published':>10}{'allocated':>10}{'plan range':>15}{'err':>8}  verdict")
    by_stat: dict[str, list[float]] = {}
    for r in rows:
        m = r["plan"].memory
        stat = r["row"]["memory_stat"] or "unknown"
        lo, hi = m.device_bytes if stat == "device" else m.reserved_bytes
        pub = float(r["row"]["peak_memory_gib"])
        e = ((lo + hi) / 2 / GIB - pub) / pub
        by_stat.setdefault(stat, []).append(e)
        print(f"  {r['row']['id']:<40}{stat:>9}{pub:>9.1f}G{m.total_bytes / GIB:>9.1f}G{lo / GIB:>7.1f}-{hi / GIB:>5.1f}G"
              f"{e:>+8.1%}  {m.verdict}")
    every = [e for es in by_stat.values() for e in es]
    for stat, es in [*sorted(by_stat.items(), key=lambda kv: kv[0] != "reserved"), ("every row", every)]:
        a = [abs(x) for x in es]
        print(f"  {stat:<9} n={len(es):2d} median |err| {statistics.median(a):5.1%}, p90 {p90(a):5.1%}, "
              f"median signed {statistics.median(es):+6.1%}")
    apart = [r["row"]["id"] for r in results if r["row"]["id"] in MEMORY_NOT_REPRESENTED]
    if apart:
        print(f"  runs whose optimizer-state placement the layout cannot state (no verdict): {len(apart)}")
    for label, sel in (("runs that ran called \"does not fit\"", [r for r in results if r["row"]["stack"] not in NO_STACK
                                                                   and r["row"]["id"] not in MEMORY_NOT_REPRESENTED]),
                       ("JAX/XLA runs (PyTorch stacks' memory)", [r for r in results if r["row"]["stack"] in NO_STACK])):
        oom = [r["row"]["id"] for r in sel if r["plan"].memory.verdict == "does not fit"]
        if sel:
            print(f"  {label}: {len(oom)} of {len(sel)}" + (f" ({', '.join(oom)})" if oom else ""))
    moe = [r for r in results if r["inp"].spec.is_moe]
    if moe:   # the MoE runs all ran: none may be called out of memory (states over d_e, dispatch, stage gathered)
        print(f"  MoE runs (all ran; no published peak): {sum(r['plan'].memory.verdict == 'does not fit' for r in moe)}"
              f" of {len(moe)} called \"does not fit\", "
              f"{sum(r['plan'].memory.verdict == 'may not fit' for r in moe)} \"may not fit\"")
        print(f"    {'id':<32}{'states':>8}{'act':>7}{'on the card':>14}{'card':>6}  verdict")
        for r in moe:
            m = r["plan"].memory
            states = m.weights_bytes + m.gradients_bytes + m.optimizer_bytes
            print(f"    {r['row']['id']:<32}{states / GIB:>7.1f}G{m.activations_bytes / GIB:>6.1f}G"
                  f"{m.device_bytes[0] / GIB:>7.1f}-{m.device_bytes[1] / GIB:>5.1f}G{m.capacity_bytes / GIB:>5.0f}G"
                  f"  {m.verdict}")
    off = [r for r in results if r["inp"].cpu_offload_layers]
    for r in off:   # column cpu_offload_layers: the recipe offloads N layers' activations (workload/offload.py)
        m, pr = r["plan"].memory, r["plan"]
        stall = pr.compute_by_operator.get("offload_s", 0.0)
        print(f"  {r['row']['id']}: {r['inp'].cpu_offload_layers} of {r['inp'].spec.layers} layers offloaded, "
              f"{m.offloaded_bytes / GIB:.1f} GiB per micro-batch to the host, device "
              f"{m.device_bytes[0] / GIB:.0f}-{m.device_bytes[1] / GIB:.0f} of {m.capacity_bytes / GIB:.0f} GiB "
              f"({m.verdict}), copies exposed {stall:.3f} s of {pr.step_s:.2f} s")
    print()


def moe_apart(results: list[dict]) -> None:
    """The MoE rows apart: signed error with the recipe's settings, with Megatron's code defaults, and as a new user
    plans them (no stack, no MoE flag: the recipes' defaults, :func:`_validation.new_user_inputs`)."""
    import _validation as V

    sel = [r for r in results if r["inp"].spec.is_moe]
    if not sel:
        return
    print(f"MoE rows ({len(sel)}; no constant fitted on them: all out of sample), signed error:")
    print(f"  {'id':<32}{'published':>10}{'recipe':>9}{'etp = t':>9}{'no stack':>9}  dispatch and groups (recipe)")
    signed, defaults, nostack = [], [], []
    for r in sel:
        inp_d, model = inputs(r["row"], moe={})
        d = (plan(inp_d, model).step_s - r["measured"]) / r["measured"]
        n = (plan(*V.new_user_inputs(r["row"], r["inp"])).step_s - r["measured"]) / r["measured"]   # as a new user
        nostack.append(n)
        e = (r["plan"].step_s - r["measured"]) / r["measured"]
        signed.append(e)
        defaults.append(d)
        from commcost.parallel.layout import group_placement
        L = r["inp"].layout
        size, rpn, nodes = group_placement(L, "ep", r["inp"].gpus_per_node)
        print(f"  {r['row']['id']:<32}{r['measured']:>9.3f}s{e:>+9.1%}{d:>+9.1%}{n:>+9.1%}  {r['inp'].a2a}, overlap "
              f"{r['inp'].moe_overlap}, ep {size} on {nodes} node(s), etp {L.expert_tp}")
    for name, pick in (("all", lambda r: True), ("published_runs.csv", lambda r: "a2a" not in r["row"]),
                       ("published_moe_runs.csv (new source)", lambda r: "a2a" in r["row"])):
        idx = [i for i, r in enumerate(sel) if pick(r)]
        for label, es in (("recipe settings", [signed[i] for i in idx]),
                          ("defaults (etp = t, nccl, no overlap)", [defaults[i] for i in idx]),
                          ("no stack named (the recipes' defaults)", [nostack[i] for i in idx])):
            if not es:
                continue
            a = [abs(x) for x in es]
            print(f"  {name + ', ' + label:<62} n={len(es):2d} median |err| {statistics.median(a):5.1%}, "
                  f"p90 {p90(a):5.1%}, median signed {statistics.median(es):+6.1%}, "
                  f"too fast {sum(x < 0 for x in es) / len(es):4.0%}")
    print()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
