"""A training job as a framework's config file states it: :class:`Job`, what ``--from`` applies to ``plan``'s and
``search``'s flags.

A reader (:mod:`commcost.formats.readers`) turns a file into a :class:`Job`: ``values``, commcost flag
destinations (``tp``, ``pp``, ``vp``, ``cp``, ``ep``, ``etp``, ``zero``, ``hsdp``, ``sequence_parallel``,
``recompute``, ``micro_batch``, ``global_batch``, ``seq``, ``precision``, ``stack``, ``compile``,
``tp_comm_overlap``, the shape flags ...) set to what the file says; ``defaults``, the values it leaves to the
framework, taken from that framework's release and said; ``unread``, keys that change performance which
commcost does not model, named; ``deferred``, quantities that depend on the GPU count or the model (torchtitan's
``data_parallel_shard_degree = -1``, its default global batch, Megatron's layers per virtual stage), resolved by
:func:`resolve_job` once those are known.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from commcost.core.errors import InputError

__all__ = ["Job", "resolve_job", "FORMATS"]

FORMATS = ("torchtitan", "megatron", "nemo", "deepspeed")
"""The frameworks whose files ``--from`` reads."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """One framework config file, read."""

    framework: str
    """One of :data:`FORMATS`."""
    path: str
    """The file."""
    values: dict = field(default_factory=dict)
    """commcost flag destination -> value the file states."""
    defaults: tuple = ()
    """``(destination, value, why)``: values the file leaves to the framework's default."""
    unread: tuple = ()
    """``key = value`` strings: settings that change performance and are not modelled."""
    deferred: dict = field(default_factory=dict)
    """Raw quantities resolved by :func:`resolve_job` (``dp_replicate``, ``dp_shard``, ``local_batch``,
    ``layers_per_stage``, ``layers_per_virtual_stage``)."""


def _div(a: int, b: int, what: str) -> int:
    if b <= 0 or a % b:
        raise InputError(f"{what}: {a} is not divisible by {b}")
    return a // b


def resolve_job(job: Job, *, gpus: int | None, layers: int | None) -> tuple[dict, tuple]:
    """``(values, defaults)``: the job's flag values with its deferred quantities resolved for ``gpus`` GPUs
    and a model of ``layers`` layers (None: unknown; a quantity that needs it is then refused).

    torchtitan (``torchtitan/config/job_config.py``, ``Parallelism``; ``parallel_dims.py``): ``dp_shard = -1``
    takes the rest of the world, ``dp_shard = W / (dp_replicate cp tp pp)``; ``dp = dp_replicate dp_shard``;
    FSDP (ZeRO-3) when ``dp_shard > 1``, hybrid (HSDP) over groups of ``dp_shard cp`` when ``dp_replicate >
    1`` too, DDP when only ``dp_replicate > 1``; the global batch ``global_batch_size``, or ``local_batch_size
    dp`` when it is -1; the micro-batch ``pipeline_parallel_microbatch_size`` with PP, else
    ``local_batch_size``; ``vp = L / (pp layers_per_stage)``. Megatron-LM: ``vp = L / (pp
    num_layers_per_virtual_pipeline_stage)``; the global batch defaults to ``micro_batch dp``. DeepSpeed: with
    ``gradient_accumulation_steps`` the file's batch must satisfy ``train_batch_size = micro x accumulation x
    dp`` on these GPUs, as DeepSpeed itself requires."""
    values, defaults = dict(job.values), list(job.defaults)
    d = job.deferred
    tp, pp, cp = values.get("tp", 1), values.get("pp", 1), values.get("cp", 1)

    def need_gpus(what: str) -> int:
        if gpus is None:
            raise InputError(f"--from {job.path}: {what} depends on the GPU count; give --gpus")
        return gpus

    if "layers_per_stage" in d or "layers_per_virtual_stage" in d:
        per = d.get("layers_per_stage") or d.get("layers_per_virtual_stage")
        if layers is None:
            raise InputError(f"--from {job.path}: layers per virtual stage need the model's layer count")
        values["vp"] = max(1, _div(layers, pp * per, f"layers {layers} over pp x layers per stage ({pp} x {per})"))
    if job.framework == "torchtitan":
        rep, shard = d.get("dp_replicate", 1), d.get("dp_shard", -1)
        if shard == -1:
            shard = _div(need_gpus("data_parallel_shard_degree = -1"), rep * cp * tp * pp,
                         "GPUs over replicate x cp x tp x pp")
        dp = rep * shard
        values["dp"] = dp
        values["zero"] = 3 if shard > 1 else 0
        if shard > 1 and rep > 1:
            values["hsdp"] = shard * cp
        local = d.get("local_batch", 8)
        if "global_batch" not in values:
            values["global_batch"] = local * dp
            defaults.append(("global_batch", local * dp, "torchtitan global_batch_size -1: local_batch_size x dp"))
        if pp > 1:
            values.setdefault("micro_batch", d.get("pp_micro_batch", 1))
        else:
            values.setdefault("micro_batch", local)
    elif job.framework == "deepspeed" and "accumulation" in d and gpus is not None \
            and {"global_batch", "micro_batch"} <= values.keys():
        dp = _div(gpus, tp * pp * cp, "GPUs over tp x pp x cp")
        b, m, k = values["global_batch"], values["micro_batch"], d["accumulation"]
        if b != m * k * dp:   # DeepSpeed's own check (runtime/config.py _batch_assertion)
            raise InputError(f"--from {job.path}: train_batch_size {b} != micro-batch x accumulation x dp = "
                             f"{m} x {k} x {dp} = {m * k * dp} on {gpus} GPUs")
    if job.framework != "torchtitan" and "global_batch" not in values and "micro_batch" in values:
        dp = _div(need_gpus("the default global batch (micro-batch x dp)"), tp * pp * cp, "GPUs over tp x pp x cp")
        values["global_batch"] = values["micro_batch"] * dp
        defaults.append(("global_batch", values["global_batch"], f"{job.framework}: micro-batch x dp"))
    return values, tuple(defaults)
