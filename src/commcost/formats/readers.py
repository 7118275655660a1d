"""Framework config files -> :class:`~commcost.formats.job.Job`: torchtitan TOML, a Megatron-LM argument file,
a NeMo / Megatron-Bridge YAML, a DeepSpeed JSON (standard library only: ``tomllib``, ``shlex``, ``json`` and
the small YAML subset of :mod:`commcost.formats.yaml_subset`).

Defaults are the releases' own: torchtitan ``torchtitan/config/job_config.py`` (v0.2: ``local_batch_size`` 8,
``seq_len`` 2048, ``data_parallel_shard_degree`` -1, ``activation_checkpoint.mode`` ``selective`` with
``selective_ac_option`` ``"2"``, ``mixed_precision_param`` bfloat16), Megatron-LM
``megatron/training/arguments.py`` (core_r0.13: every parallel size 1, no recomputation, fp32 without
``--bf16``/``--fp16``, ``--global-batch-size`` micro-batch x dp), DeepSpeed ``deepspeed/runtime/config.py``
(ZeRO stage 0, fp32 without ``bf16``/``fp16`` ``enabled``).
"""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path

from commcost.core.errors import InputError
from commcost.formats.job import Job
from commcost.formats.yaml_subset import loads

__all__ = ["read_job", "read_torchtitan", "read_megatron", "read_deepspeed", "read_nemo", "guess_framework"]


def _text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"--from {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"--from {path}: cannot read it ({e})") from None


def guess_framework(path: str) -> str:
    """The framework of ``path`` by its suffix (``.toml`` torchtitan, ``.json`` DeepSpeed, ``.yaml``/``.yml``
    NeMo, anything else a Megatron-LM argument file)."""
    suffix = Path(path).suffix.lower()
    return {".toml": "torchtitan", ".json": "deepspeed", ".yaml": "nemo", ".yml": "nemo"}.get(suffix, "megatron")


def read_job(path: str, framework: str | None = None) -> Job:
    """The :class:`Job` of ``path`` (``framework`` None: :func:`guess_framework`)."""
    kind = framework or guess_framework(path)
    reader = {"torchtitan": read_torchtitan, "megatron": read_megatron, "deepspeed": read_deepspeed,
              "nemo": read_nemo}[kind]
    return reader(path)


# --- torchtitan ------------------------------------------------------------------------------------------

_TT_MODELS = {("llama3", "8B"): "llama3.1-8b", ("llama3", "70B"): "llama3.1-70b", ("llama3", "405B"): "llama3.1-405b"}
"""torchtitan ``[model] name, flavor`` -> registry model (``torchtitan/models/llama3/__init__.py``: the Llama 3.1
shapes)."""

_TT_READ = {
    "parallelism": {"data_parallel_replicate_degree", "data_parallel_shard_degree", "tensor_parallel_degree",
                    "pipeline_parallel_degree", "context_parallel_degree", "expert_parallel_degree",
                    "expert_tensor_parallel_degree", "pipeline_parallel_microbatch_size",
                    "pipeline_parallel_schedule", "pipeline_parallel_layers_per_stage", "enable_async_tensor_parallel",
                    "disable_loss_parallel", "fsdp_reshard_after_forward"},
    "training": {"local_batch_size", "batch_size", "global_batch_size", "seq_len", "mixed_precision_param",
                 "mixed_precision_reduce", "steps", "max_norm", "warmup_steps", "dataset", "dataset_path",
                 "compile", "gc_freq", "seed", "deterministic"},
    "activation_checkpoint": {"mode", "selective_ac_option"},
    "compile": {"enable", "components"},
}
_TT_PERF_SECTIONS = ("float8", "mx", "quantize", "parallelism", "training", "activation_checkpoint", "compile", "model")


def _tt_layout(par: dict, tr: dict, v: dict, defaults: list, deferred: dict, unread: list) -> None:
    """torchtitan's parallel degrees, data-parallel replicate and shard degrees, batch and pipeline schedule."""
    for key, dest in (("tensor_parallel_degree", "tp"), ("pipeline_parallel_degree", "pp"),
                      ("context_parallel_degree", "cp"), ("expert_parallel_degree", "ep"),
                      ("expert_tensor_parallel_degree", "etp")):
        if key in par:
            v[dest] = int(par[key])
    deferred["dp_replicate"] = int(par.get("data_parallel_replicate_degree", 1))
    deferred["dp_shard"] = int(par.get("data_parallel_shard_degree", -1))
    if "data_parallel_shard_degree" not in par:
        defaults.append(("dp_shard", -1, "torchtitan data_parallel_shard_degree -1: FSDP over the rest"))
    local = tr.get("local_batch_size", tr.get("batch_size"))
    if local is None:
        local = 8
        defaults.append(("local_batch_size", 8, "torchtitan training.local_batch_size"))
    deferred["local_batch"] = int(local)
    if int(tr.get("global_batch_size", -1)) > 0:
        v["global_batch"] = int(tr["global_batch_size"])
    if v.get("pp", 1) > 1:
        deferred["pp_micro_batch"] = int(par.get("pipeline_parallel_microbatch_size", 1))
        schedule = str(par.get("pipeline_parallel_schedule", "1F1B"))
        if "pipeline_parallel_layers_per_stage" in par:
            deferred["layers_per_stage"] = int(par["pipeline_parallel_layers_per_stage"])
        elif schedule.lower() not in ("1f1b", "gpipe"):
            unread.append(f"pipeline_parallel_schedule = {schedule} (without layers_per_stage: vp 1 assumed)")
        if schedule.lower() not in ("1f1b", "interleaved1f1b", "gpipe"):
            unread.append(f"pipeline_parallel_schedule = {schedule} (priced as 1F1B / interleaved 1F1B)")


def _tt_sequence_recompute_precision(doc: dict, v: dict, defaults: list, unread: list) -> None:
    """torchtitan's sequence length, activation checkpointing and precision (mixed precision, float8/mx converters)."""
    tr, ac, model = doc.get("training", {}), doc.get("activation_checkpoint", {}), doc.get("model", {})
    if "seq_len" in tr:
        v["seq"] = int(tr["seq_len"])
    else:
        v["seq"] = 2048
        defaults.append(("seq", 2048, "torchtitan training.seq_len"))
    mode = str(ac.get("mode", "selective"))
    option = str(ac.get("selective_ac_option", "2"))
    if "mode" not in ac:
        defaults.append(("recompute", "selective", "torchtitan activation_checkpoint.mode"))
    if mode == "none":
        v["recompute"] = "none"
    elif mode == "full":
        v["recompute"] = "full"
    elif option == "op":
        v["recompute"] = "selective"
    else:
        v["recompute"] = "full"
        unread.append(f"selective_ac_option = {option} (every {option}th layer checkpointed: priced as full on all)")
    param = str(tr.get("mixed_precision_param", "bfloat16"))
    if param not in ("bfloat16", "float16"):
        unread.append(f"mixed_precision_param = {param} (priced as bf16)")
    converters = [str(c) for c in model.get("converters", [])]
    quant = doc.get("quantize", {}).get("linear", {})
    if "float8" in converters or "float8" in quant or doc.get("float8"):
        v["precision"] = "fp8"
    elif "mx" in converters or "mx" in quant or doc.get("mx"):
        v["precision"] = "mxfp8"
    else:
        v["precision"] = "fp16" if param == "float16" else "bf16"


def read_torchtitan(path: str) -> Job:
    """A torchtitan job TOML (module docstring)."""
    try:
        doc = tomllib.loads(_text(path))
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"--from {path}: not TOML ({e})") from None
    par, tr = doc.get("parallelism", {}), doc.get("training", {})
    comp, model = doc.get("compile", {}), doc.get("model", {})
    v: dict = {"stack": "torchtitan"}
    defaults: list = []
    deferred: dict = {}
    unread: list = []
    _tt_layout(par, tr, v, defaults, deferred, unread)
    _tt_sequence_recompute_precision(doc, v, defaults, unread)
    if comp.get("enable") or tr.get("compile"):
        v["compile"] = True
    if par.get("enable_async_tensor_parallel"):
        v["tp_comm_overlap"] = True
    if str(par.get("fsdp_reshard_after_forward", "default")) == "never":
        unread.append("fsdp_reshard_after_forward = never (ZeRO-2-like: not modelled, priced as ZeRO-3)")
    if (model.get("name"), model.get("flavor")) in _TT_MODELS:
        v["model"] = _TT_MODELS[(model.get("name"), model.get("flavor"))]
    elif model.get("name"):
        unread.append(f"model = {model.get('name')} {model.get('flavor', '')} (not in the registry: give --model "
                      "or --hf-config)")
    for section, keys in _TT_READ.items():
        for k in doc.get(section, {}):
            if k not in keys and section in _TT_PERF_SECTIONS:
                unread.append(f"{section}.{k} = {doc[section][k]}")
    return Job(framework="torchtitan", path=path, values=v, defaults=tuple(defaults), unread=tuple(unread),
               deferred=deferred)


# --- Megatron-LM ----------------------------------------------------------------------------------------

_MEG_INT = {"tensor-model-parallel-size": "tp", "pipeline-model-parallel-size": "pp",
            "virtual-pipeline-model-parallel-size": "vp", "context-parallel-size": "cp",
            "expert-model-parallel-size": "ep", "expert-tensor-parallel-size": "etp", "micro-batch-size": "micro_batch",
            "global-batch-size": "global_batch", "seq-length": "seq", "num-layers": "layers", "hidden-size": "hidden",
            "num-attention-heads": "heads", "num-query-groups": "kv_heads", "ffn-hidden-size": "ffn_hidden",
            "kv-channels": "head_dim", "num-experts": "experts", "moe-router-topk": "top_k",
            "moe-ffn-hidden-size": "expert_ffn_hidden", "vocab-size": "vocab", "cpu-offloading-num-layers":
            "cpu_offload_layers"}
_MEG_FLAGS = {"sequence-parallel": ("sequence_parallel", True), "swiglu": ("gated_mlp", True),
              "tp-comm-overlap": ("tp_comm_overlap", True), "use-distributed-optimizer": ("zero", 1),
              "use-torch-fsdp2": ("zero", 3), "recompute-activations": ("recompute", "selective"),
              "bf16": ("precision", "bf16"), "fp16": ("precision", "fp16"),
              "account-for-embedding-in-pipeline-split": ("split_counts_ends", True),
              "account-for-loss-in-pipeline-split": ("split_counts_ends", True),
              "overlap-moe-expert-parallel-comm": ("moe_overlap", "1f1b")}
_MEG_NAMED = ("group-query-attention", "use-mcore-models", "moe-grouped-gemm", "use-flash-attn", "overlap-grad-reduce",
              "overlap-param-gather", "untie-embeddings-and-output-weights", "disable-bias-linear",
              "normalization", "position-embedding-type", "transformer-impl", "attention-backend",
              "moe-router-load-balancing-type", "moe-aux-loss-coeff", "use-rotary-position-embeddings",
              "moe-permute-fusion", "cross-entropy-loss-fusion")
"""Keys read without changing the price: the model's structure the shape flags give, or what commcost's
``megatron`` stack already assumes (grouped GEMM, flash attention, gradient and parameter overlap)."""
_MEG_IGNORED_PREFIXES = ("data-", "train-", "lr", "min-lr", "weight-decay", "adam-", "clip-grad", "save", "load",
                         "log", "tensorboard", "wandb", "eval-", "tokenizer", "vocab-file", "merge-file", "split",
                         "seed", "init-method", "exit-", "distributed-timeout", "distributed-backend", "no-",
                         "micro-batch", "max-position-embeddings", "rotary-", "norm-epsilon", "attention-dropout",
                         "hidden-dropout", "make-vocab-size-divisible-by", "ckpt-", "use-checkpoint", "timing-",
                         "num-workers", "mock-data", "moe-router-", "moe-z-loss", "bias-", "masked-softmax",
                         "apply-", "qk-layernorm", "hf-", "profile", "iterations", "dataloader", "override-",
                         "trust-remote", "finetune", "use-cpu-initialization", "rerun-", "manual-gc")


def _meg_tokens(text: str) -> list[str]:
    text = text.replace("\\\n", " ")
    try:
        return shlex.split(text, comments=True)
    except ValueError as e:
        raise InputError(f"not a Megatron-LM argument list ({e})") from None


def _meg_args(tokens: list[str]) -> dict:
    """``{flag: value}`` of a Megatron-LM command line (``True`` for a flag with no value); tokens before the
    first flag (the interpreter, the script, torchrun's own flags' values) are skipped."""
    args: dict = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("--"):
            i += 1   # the interpreter, the script, torchrun's own flags' values
            continue
        key, _, value = tok[2:].partition("=")
        if not _ and i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            value = tokens[i + 1]
            i += 1
        args[key] = value if value != "" else True
        i += 1
    return args


def _meg_flag(key: str, value, args: dict, v: dict, unread: list, deferred: dict, path: str) -> None:
    """Read one Megatron-LM flag into ``v`` (``deferred``: what needs the layout first; ``unread``: what is not
    priced, or priced otherwise, in words)."""
    if key in _MEG_INT:
        if value is True or "$" in str(value):
            raise InputError(f"--from {path}: --{key} needs a number, got {value!r}")
        try:
            v[_MEG_INT[key]] = int(value)
        except ValueError:
            raise InputError(f"--from {path}: --{key} needs a number, got {value!r}") from None
    elif key in _MEG_FLAGS:
        dest, val = _MEG_FLAGS[key]
        v[dest] = val
    elif key == "num-layers-per-virtual-pipeline-stage":
        deferred["layers_per_virtual_stage"] = int(value)
    elif key == "recompute-granularity":
        v["recompute"] = str(value)
    elif key == "recompute-method" or key == "recompute-num-layers":
        unread.append(f"--{key} {value} (priced as recompute of every layer)")
    elif key == "fp8-format":
        v["precision"] = "fp8"
    elif key == "fp8-recipe":
        v["precision"] = {"mxfp8": "mxfp8"}.get(str(value), "fp8")
    elif key == "fp4-format":
        v["precision"] = "nvfp4"
    elif key in ("moe-token-dispatcher-type", "moe-enable-deepep"):
        if key == "moe-enable-deepep" or str(value) == "flex":
            v["a2a"] = "deepep" if args.get("moe-enable-deepep") else v.get("a2a", "nccl")
    elif key == "ddp-bucket-size":   # gradient elements, 2 bytes each in bf16: MiB
        v["bucket_mb"] = int(value) * 2 / 2**20
    elif key == "moe-expert-capacity-factor":
        v["capacity_factor"] = float(value)
    elif key in ("decoder-first-pipeline-num-layers", "decoder-last-pipeline-num-layers"):
        v["uneven_pipeline"] = True
        unread.append(f"--{key} {value} (priced as the heaviest stage taking ceil(L/(pp vp)))")
    elif key == "use-megatron-fsdp":
        strategy = str(args.get("data-parallel-sharding-strategy", "optim_grads_params"))
        v["zero"] = {"no_shard": 0, "optim": 1, "optim_grads": 2}.get(strategy, 3)
    elif key in ("data-parallel-sharding-strategy", "cpu-offloading"):
        pass
    elif key in _MEG_NAMED or key.startswith(_MEG_IGNORED_PREFIXES):
        pass
    else:
        unread.append(f"--{key}" + ("" if value is True else f" {value}"))


def _meg_defaults(v: dict, args: dict) -> list:
    """Megatron-LM's defaults for what the file does not say, each with why (set into ``v``)."""
    defaults: list = []
    if "kv_heads" in v and "group-query-attention" not in args:
        del v["kv_heads"]    # Megatron reads --num-query-groups only with --group-query-attention
    for dest, val, why in (("tp", 1, "--tensor-model-parallel-size"), ("pp", 1, "--pipeline-model-parallel-size"),
                           ("recompute", "none", "no --recompute-granularity")):
        if dest not in v:
            v[dest] = val
            defaults.append((dest, val, f"Megatron-LM {why} default"))
    if "precision" not in v:
        defaults.append(("precision", "bf16", "no --bf16/--fp16: Megatron-LM trains in fp32, which commcost does "
                         "not price; priced as bf16"))
        v["precision"] = "bf16"
    if "zero" not in v:
        v["zero"] = 0
        defaults.append(("zero", 0, "Megatron-LM without --use-distributed-optimizer: DDP"))
    return defaults


def read_megatron(path: str) -> Job:
    """A Megatron-LM argument file: the ``pretrain_gpt.py`` flags, as a launch script passes them (``--flag
    value`` or ``--flag=value``; ``#`` comments and ``\\`` line ends allowed)."""
    args = _meg_args(_meg_tokens(_text(path)))
    v: dict = {"stack": "megatron"}
    unread: list = []
    deferred: dict = {}
    for key, value in args.items():
        _meg_flag(key, value, args, v, unread, deferred, path)
    defaults = _meg_defaults(v, args)
    return Job(framework="megatron", path=path, values=v, defaults=tuple(defaults), unread=tuple(unread),
               deferred=deferred)


# --- DeepSpeed ------------------------------------------------------------------------------------------

_DS_READ = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "zero_optimization",
            "bf16", "fp16", "tensor_parallel")
_DS_NO_COST = ("gradient_clipping", "optimizer", "scheduler", "steps_per_print", "wall_clock_breakdown",
               "wandb", "tensorboard", "csv_monitor", "comms_logger", "flops_profiler", "seed", "prescale_gradients",
               "gradient_predivide_factor", "dump_state", "checkpoint", "zero_allow_untested_optimizer")
"""DeepSpeed keys read, and keys that do not change the step (every other key is named as not modelled)."""


def read_deepspeed(path: str) -> Job:
    """A DeepSpeed config JSON: ``train_batch_size``, ``train_micro_batch_size_per_gpu``, ``zero_optimization``
    ``stage``, ``bf16``/``fp16`` ``enabled``, ``tensor_parallel`` ``autotp_size``."""
    try:
        doc = json.loads(_text(path))
    except json.JSONDecodeError as e:
        raise InputError(f"--from {path}: not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise InputError(f"--from {path}: expected a JSON object")
    v: dict = {"stack": "deepspeed"}
    defaults: list = []
    unread: list = []
    for key, dest in (("train_batch_size", "global_batch"), ("train_micro_batch_size_per_gpu", "micro_batch")):
        if isinstance(doc.get(key), int):
            v[dest] = doc[key]
        elif doc.get(key) not in (None, "auto"):
            raise InputError(f"--from {path}: {key} must be an integer, got {doc.get(key)!r}")
    gas = doc.get("gradient_accumulation_steps")
    deferred = {"accumulation": gas} if isinstance(gas, int) and gas > 0 else {}
    zero = doc.get("zero_optimization", {}) or {}
    v["zero"] = int(zero.get("stage", 0))
    if "stage" not in zero:
        defaults.append(("zero", 0, "DeepSpeed zero_optimization.stage"))
    for k in ("offload_optimizer", "offload_param"):
        if zero.get(k) and (zero[k].get("device", "none") if isinstance(zero[k], dict) else zero[k]) != "none":
            unread.append(f"zero_optimization.{k} = {zero[k]}")
    if (doc.get("bf16") or {}).get("enabled"):
        v["precision"] = "bf16"
    elif (doc.get("fp16") or {}).get("enabled"):
        v["precision"] = "fp16"
    else:
        v["precision"] = "bf16"
        defaults.append(("precision", "bf16", "no bf16/fp16 enabled: DeepSpeed trains in fp32, which commcost does "
                         "not price; priced as bf16"))
    tp = (doc.get("tensor_parallel") or {}).get("autotp_size")
    if tp:
        v["tp"] = int(tp)
    for k, val in doc.items():
        if k not in _DS_READ and k not in _DS_NO_COST and val not in (None, False, {}, [], "auto"):
            unread.append(f"{k} = {json.dumps(val)}")
    if "activation_checkpointing" in doc:
        unread.append("recomputation is the model code's (deepspeed.checkpointing): give --recompute")
    return Job(framework="deepspeed", path=path, values=v, defaults=tuple(defaults), unread=tuple(unread),
               deferred=deferred)


# --- NeMo / Megatron-Bridge ------------------------------------------------------------------------------

_NEMO_KEYS = {"tensor_model_parallel_size": "tp", "pipeline_model_parallel_size": "pp",
              "virtual_pipeline_model_parallel_size": "vp", "context_parallel_size": "cp",
              "expert_model_parallel_size": "ep", "expert_tensor_parallel_size": "etp",
              "sequence_parallel": "sequence_parallel", "micro_batch_size": "micro_batch",
              "global_batch_size": "global_batch", "seq_length": "seq", "encoder_seq_length": "seq",
              "num_layers": "layers", "hidden_size": "hidden", "num_attention_heads": "heads",
              "num_query_groups": "kv_heads", "ffn_hidden_size": "ffn_hidden", "num_moe_experts": "experts",
              "moe_router_topk": "top_k", "moe_ffn_hidden_size": "expert_ffn_hidden",
              "tp_comm_overlap": "tp_comm_overlap"}


def _flatten(doc, prefix: str = "") -> dict:
    out = {}
    if isinstance(doc, dict):
        for k, val in doc.items():
            out.update(_flatten(val, f"{prefix}{k}."))
    else:
        out[prefix[:-1]] = doc
    return out


def read_nemo(path: str) -> Job:
    """A NeMo (``model.*``, ``trainer.*``) or Megatron-Bridge (``model.*``, ``train.*``, ``ddp.*``) YAML: each
    key is matched by its last name wherever it sits (both layouts name the Megatron-Core fields the same)."""
    flat = _flatten(loads(_text(path), path))
    v: dict = {"stack": "nemo"}
    unread: list = []
    for full, val in flat.items():
        name = full.rsplit(".", 1)[-1]
        if name in _NEMO_KEYS and val is not None:
            v[_NEMO_KEYS[name]] = bool(val) if _NEMO_KEYS[name] in ("sequence_parallel", "tp_comm_overlap") else int(val)
        elif name in ("recompute_granularity", "activations_checkpoint_granularity") and val:
            v["recompute"] = str(val)
        elif (name == "use_distributed_optimizer" and val) or (full.endswith("optim.name")
                                                               and val == "distributed_fused_adam"):
            v["zero"] = 1   # NeMo 1's distributed_fused_adam is Megatron's distributed optimizer
        elif name == "precision" or name == "mixed_precision":
            text = str(val)
            v["precision"] = "fp16" if "16" in text and "bf" not in text else "bf16"
        elif name == "fp8" and val:
            v["precision"] = "mxfp8" if str(flat.get(full.rsplit(".", 1)[0] + ".fp8_recipe", "")) == "mxfp8" else "fp8"
        elif name in ("recompute_method", "recompute_num_layers", "activations_checkpoint_method",
                      "activations_checkpoint_num_layers", "cpu_offloading") and val:
            unread.append(f"{full} = {val}")
    nodes, devices = flat.get("trainer.num_nodes"), flat.get("trainer.devices")
    if isinstance(nodes, int) and isinstance(devices, int):
        v["gpus"] = nodes * devices
    defaults = []
    for dest, val, why in (("tp", 1, "tensor_model_parallel_size"), ("pp", 1, "pipeline_model_parallel_size"),
                           ("recompute", "none", "no recompute_granularity"),
                           ("zero", 0, "no distributed optimizer: DDP")):
        if dest not in v:
            v[dest] = val
            defaults.append((dest, val, f"Megatron-Core {why}"))
    defaults = tuple(defaults)
    return Job(framework="nemo", path=path, values=v, defaults=defaults, unread=tuple(unread))
