"""A priced layout -> the framework's own config fragment (``search --emit KIND FILE``), written so that
:func:`commcost.formats.readers.read_job` reads it back to the same layout, batch, sequence, recomputation,
precision and stack (``tests/formats/test_emit.py`` holds the round trip).

* ``torchtitan``: ``[training]``, ``[parallelism]``, ``[activation_checkpoint]`` (``selective`` is the op-level
  policy, ``selective_ac_option = "op"``, as commcost's torchtitan stack prices it), ``[compile]`` and the
  float8 / MX converters; FSDP as ``data_parallel_shard_degree`` (HSDP: ``shard group / cp`` shards, the rest
  replicated). torchtitan shards with FSDP or replicates (DDP): a ZeRO-1/2 layout has no torchtitan form.
* ``megatron``: ``pretrain_gpt.py`` arguments, the model's shape included (``--num-layers`` ...).
* ``deepspeed``: the ZeRO config JSON; the pipeline, context and expert layout live in the model code under
  DeepSpeed, so a layout using them is refused.
"""

from __future__ import annotations

import json

from commcost.core.errors import InputError

__all__ = ["EMIT_KINDS", "emit"]

EMIT_KINDS = ("torchtitan", "megatron", "deepspeed")
"""What ``--emit`` writes."""

_TT_FLAVORS = {"llama3.1-8b": ("llama3", "8B"), "llama3.1-70b": ("llama3", "70B"), "llama3.1-405b": ("llama3", "405B")}


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)


def _torchtitan(inp) -> str:
    L = inp.layout
    if L.zero in (1, 2):
        raise InputError(f"--emit torchtitan: torchtitan shards with FSDP (ZeRO-3) or replicates (DDP); the winner "
                         f"uses ZeRO-{L.zero} (search with --stack torchtitan)")
    if inp.precision == "nvfp4":
        raise InputError("--emit torchtitan: torchtitan has no NVFP4 training recipe")
    if L.zero == 3:
        shard = (L.shard_group // L.cp) if L.shard_group else L.dp
        replicate = L.dp // shard
    else:
        shard, replicate = 1, L.dp
    lines = ["# commcost search --emit torchtitan: the winner's job sections; merge into a torchtitan train config"]
    if inp.spec.name in _TT_FLAVORS:
        name, flavor = _TT_FLAVORS[inp.spec.name]
        lines += ["[model]", f"name = {_toml_value(name)}", f"flavor = {_toml_value(flavor)}", ""]
    else:
        lines += [f"# model: {inp.spec.name} (give it to commcost as --model or --hf-config)", ""]
    lines.append("[training]")
    if L.pp > 1:
        lines.append(f"local_batch_size = {L.global_batch // L.dp}")
    else:
        lines.append(f"local_batch_size = {L.micro_batch}")
    lines += [f"global_batch_size = {L.global_batch}", f"seq_len = {inp.seq}", "",
              "[parallelism]", f"data_parallel_replicate_degree = {replicate}",
              f"data_parallel_shard_degree = {shard}", f"tensor_parallel_degree = {L.tp}",
              f"pipeline_parallel_degree = {L.pp}", f"context_parallel_degree = {L.cp}",
              f"expert_parallel_degree = {L.ep}"]
    if L.etp:
        lines.append(f"expert_tensor_parallel_degree = {L.etp}")
    if L.pp > 1:
        lines += [f"pipeline_parallel_microbatch_size = {L.micro_batch}",
                  f"pipeline_parallel_schedule = {_toml_value('Interleaved1F1B' if L.vp > 1 else '1F1B')}",
                  f"pipeline_parallel_layers_per_stage = {inp.spec.layers // (L.pp * L.vp)}"]
    if inp.tp_comm_overlap:
        lines.append("enable_async_tensor_parallel = true")
    lines += ["", "[activation_checkpoint]", f"mode = {_toml_value(L.recompute)}"]
    if L.recompute == "selective":
        lines.append('selective_ac_option = "op"')
    lines += ["", "[compile]", f"enable = {_toml_value(bool(inp.compiled))}"]
    if inp.precision in ("fp8", "mxfp8"):
        lines += ["", "[quantize.linear.float8]" if inp.precision == "fp8" else "[quantize.linear.mx]"]
    return "\n".join(lines) + "\n"


def _megatron(inp) -> str:
    L, s = inp.layout, inp.spec
    out = [f"# commcost search --emit megatron: pretrain_gpt.py arguments of the winner ({s.name})",
           f"--num-layers {s.layers} --hidden-size {s.hidden} --num-attention-heads {s.heads} \\",
           f"--ffn-hidden-size {s.ffn} --vocab-size {s.vocab} \\"]
    if s.kv_heads and s.kv_heads != s.heads:
        out.append(f"--group-query-attention --num-query-groups {s.kv_heads} \\")
    if s.gated_mlp:
        out.append("--swiglu \\")
    if s.is_moe:
        out.append(f"--num-experts {s.experts} --moe-router-topk {s.top_k} --moe-ffn-hidden-size {s.expert_ffn} \\")
    out.append(f"--seq-length {inp.seq} --micro-batch-size {L.micro_batch} --global-batch-size {L.global_batch} \\")
    par = [f"--tensor-model-parallel-size {L.tp}", f"--pipeline-model-parallel-size {L.pp}"]
    if L.vp > 1:
        par.append(f"--num-layers-per-virtual-pipeline-stage {s.layers // (L.pp * L.vp)}")
    if L.cp > 1:
        par.append(f"--context-parallel-size {L.cp}")
    if L.ep > 1:
        par.append(f"--expert-model-parallel-size {L.ep}")
    if L.etp:
        par.append(f"--expert-tensor-parallel-size {L.etp}")
    if L.sequence_parallel:
        par.append("--sequence-parallel")
    par.append({0: "", 1: "--use-distributed-optimizer", 2: "--use-megatron-fsdp --data-parallel-sharding-strategy "
                "optim_grads", 3: "--use-torch-fsdp2"}[L.zero])
    if L.recompute != "none":
        par.append(f"--recompute-granularity {L.recompute}")
    par.append({"bf16": "--bf16", "fp16": "--fp16", "fp8": "--bf16 --fp8-format hybrid",
                "mxfp8": "--bf16 --fp8-format e4m3 --fp8-recipe mxfp8", "nvfp4": "--bf16 --fp4-format e2m1"}[inp.precision])
    if inp.tp_comm_overlap:
        par.append("--tp-comm-overlap")
    if inp.bucket_cap_bytes:   # Megatron counts the bucket in gradient elements (2-byte bf16 gradients)
        par.append(f"--ddp-bucket-size {inp.bucket_cap_bytes // 2}")
    out.append(" ".join(p for p in par if p))
    return "\n".join(out) + "\n"


def _deepspeed(inp) -> str:
    L = inp.layout
    if L.pp > 1 or L.cp > 1 or L.ep > 1 or L.vp > 1:
        raise InputError(f"--emit deepspeed: the DeepSpeed config cannot state pp {L.pp}, vp {L.vp}, cp {L.cp} or "
                         f"ep {L.ep} (they live in the model code); search with --fix pp=1,cp=1,ep=1")
    if inp.precision not in ("bf16", "fp16"):
        raise InputError(f"--emit deepspeed: {inp.precision} is not a DeepSpeed config precision")
    doc = {"train_batch_size": L.global_batch, "train_micro_batch_size_per_gpu": L.micro_batch,
           "gradient_accumulation_steps": L.global_batch // (L.micro_batch * L.dp),
           "zero_optimization": {"stage": L.zero}, inp.precision: {"enabled": True}}
    if L.tp > 1:
        doc["tensor_parallel"] = {"autotp_size": L.tp}
    return json.dumps(doc, indent=2) + "\n"


def emit(kind: str, inputs) -> str:
    """The config text of ``kind`` (:data:`EMIT_KINDS`) for the priced layout ``inputs``
    (:class:`commcost.analyses.plan.plan.PlanInputs`)."""
    try:
        writer = {"torchtitan": _torchtitan, "megatron": _megatron, "deepspeed": _deepspeed}[kind]
    except KeyError:
        raise InputError(f"--emit {kind!r}: valid kinds are {', '.join(EMIT_KINDS)}") from None
    return writer(inputs)
