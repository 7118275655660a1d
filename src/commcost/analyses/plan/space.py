"""The search space: every valid parallel layout of one model on one (or a range of) GPU counts.

A configuration is ``(W, t, p, v, c, e, d, b, SP, recompute, z, bucket cap)`` with ``W = d t p c``
and the rules of :mod:`commcost.parallel.layout` (:func:`~commcost.parallel.layout.check_layout`
and :class:`~commcost.parallel.layout.Layout`'s own), applied here to whole columns:

* ``t`` divides ``n_q``, and ``n_kv`` and ``t`` divide one another; ``t <= G`` (a node) unless fixed;
* ``p v <= L`` (no empty chunks); ``L mod (p v) != 0`` is kept as an uneven pipeline (Megatron's
  ``pipeline_model_parallel_layout``; the heaviest stage holds ``ceil(L/(p v)) v`` layers) unless
  ``even_pipeline_only``; ``v > 1`` needs ``p > 1`` and ``m = B/(b d)`` a multiple of ``p``;
* ``c > 1`` needs ``s`` divisible by ``2c``; sequence parallelism needs ``t > 1`` and ``(s/c) mod t = 0``;
* ``e`` divides ``E`` and ``t d c`` (dense models: ``e = 1``); ``b d`` divides ``B``; expert tensor
  parallelism ``t_e``: Megatron's default (t where ``e`` divides ``d c``, else 1) and, with ``e > 1``
  and ``t > 1``, also 1 (the recipes' ``expert_tensor_parallel_size = 1``); ``--fix etp=N`` pins it;
* with ``--moe-overlap 1f1b``, ``v > 1`` where ``p > 1``; with ``dualpipe``, ``p`` even
  (:func:`commcost.analyses.plan.plan.check_moe_options`);
* ZeRO stages 1-3 only where some rank shares a shard (``d c > 1`` or ``t d c / (e t_e) > 1``; else they
  equal stage 0); the DP bucket cap only where a bucketed reduction runs (ZeRO 0-2 with a shard shared):
  DDP's default (first bucket 1 MiB, then 25 MiB) and :data:`BUCKET_CAPS_MIB`;
* with a named stack (``--stack NAME``, not ``auto``), only the layouts that stack runs
  (:func:`commcost.workload.stacks.layout_runs` on the columns: its ZeRO stages, with and without a
  pipeline or model parallelism, TP, PP, interleaving, CP, EP, its sequence-parallel rule, the
  recomputation it runs and whether it accumulates gradients without a pipeline, from ``hardware/stacks.json``).

Not searched (fixed at ``plan``'s defaults): the rank order (``tp-cp-ep-dp-pp``), hybrid sharding,
TP communication overlap and flash attention (inputs of the whole search).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from commcost.core.errors import InputError
from commcost.core.units import MiB
from commcost.core.validation import require_count
from commcost.parallel.layout import expert_data_parallel
from commcost.workload.stacks import STACKS, auto_masks, layout_runs
from commcost.workload.stacks import stack_layouts

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.workload.transformer import TransformerSpec

__all__ = ["BUCKET_CAPS_MIB", "RECOMPUTE", "FIXABLE", "SearchSpace", "enumerate_space", "bucket_caps_bytes", "parse_fix",
           "count_upper_bound"]

BUCKET_CAPS_MIB = (0, 100, 400)
"""Bucket caps searched, MiB; 0 is DDP's default (``bucket_cap_mb=None``: first bucket 1 MiB, then 25)."""
RECOMPUTE = ("none", "selective", "full")
"""Recomputation choices, in column code order (0, 1, 2)."""
FIXABLE = ("gpus", "tp", "pp", "vp", "cp", "ep", "dp", "zero", "micro_batch", "sp", "recompute", "bucket_mb", "etp")
"""Dimensions ``--fix`` accepts."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """What is searched: the model, the batch, the GPU counts and any fixed dimensions."""

    spec: TransformerSpec
    """The model."""
    seq: int
    """Sequence length s, tokens."""
    global_batch: int
    """Sequences per optimizer step B."""
    gpus: tuple[int, ...]
    """GPU counts W searched (one, or a range)."""
    gpus_per_node: int
    """GPUs G per node: the default bound on t."""
    fixed: tuple[tuple[str, int], ...] = field(default=())
    """``(dimension, value)`` pairs every configuration must have (``--fix tp=8``); ``sp`` 0/1,
    ``recompute`` as its code in :data:`RECOMPUTE`, ``bucket_mb`` in MiB (0: DDP's default)."""
    even_pipeline_only: bool = False
    """Drop layouts whose ``p v`` does not divide the layers."""

    def __post_init__(self) -> None:

        require_count("seq", self.seq)
        require_count("global_batch", self.global_batch)
        require_count("gpus_per_node", self.gpus_per_node)
        if not self.gpus:
            raise InputError("no GPU count to search")
        for w in self.gpus:
            require_count("gpus", w)
        for key, _ in self.fixed:
            if key not in FIXABLE:
                raise InputError(f"cannot fix {key!r} (valid: {', '.join(FIXABLE)})")

    def fix(self, key: str) -> int | None:
        """The value ``key`` is fixed at, or None."""
        for k, v in self.fixed:
            if k == key:
                return v
        return None


def parse_fix(items: list[str]) -> tuple[tuple[str, int], ...]:
    """``["tp=8", "recompute=selective", "sp=1"]`` -> ``(("tp", 8), ("recompute", 1), ("sp", 1))``."""
    out = []
    aliases = {"mb": "micro_batch", "micro-batch": "micro_batch", "sequence_parallel": "sp",
               "sequence-parallel": "sp", "bucket": "bucket_mb", "bucket-mb": "bucket_mb", "fsdp": "zero"}
    for item in items:
        for part in item.split(","):
            key, sep, value = part.partition("=")
            key = aliases.get(key.strip(), key.strip())
            if not sep or key not in FIXABLE:
                raise InputError(f"--fix takes DIM=VALUE with DIM one of {', '.join(FIXABLE)}, got {part!r}")
            value = value.strip()
            if key == "recompute":
                if value not in RECOMPUTE:
                    raise InputError(f"--fix recompute= takes {', '.join(RECOMPUTE)}, got {value!r}")
                out.append((key, RECOMPUTE.index(value)))
                continue
            if key == "sp" and value.lower() in ("true", "false", "on", "off", "yes", "no"):
                value = "1" if value.lower() in ("true", "on", "yes") else "0"
            try:
                number = int(value)
            except ValueError:
                raise InputError(f"--fix {key}= takes an integer, got {value!r}") from None
            if number < (0 if key in ("zero", "sp", "bucket_mb") else 1) or (key == "zero" and number > 3) \
                    or (key == "sp" and number > 1):
                raise InputError(f"--fix {key}={number} is out of range")
            out.append((key, number))
    return tuple(out)


def _divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending, in O(sqrt n) steps (``--global-batch`` may be ~1e7)."""
    small, large = [], []
    k = 1
    while k * k <= n:
        if n % k == 0:
            small.append(k)
            if k * k != n:
                large.append(n // k)
        k += 1
    return small + large[::-1]


def _allowed(space: SearchSpace, key: str, values) -> list[int]:
    v = space.fix(key)
    return [x for x in values if x == v] if v is not None else list(values)


def _expert_tps(space: SearchSpace, t: int, d: int, c: int, e: int) -> list[int]:
    """The ``t_e`` searched for one ``(t, d, c, e)`` (module docstring)."""
    default = t if (d * c) % e == 0 else 1
    values = [default] + ([1] if default != 1 and e > 1 else [])
    fixed = space.fix("etp")
    if fixed is not None:
        values = [fixed] if (t * d * c) % (e * fixed) == 0 else []
    return values


def _base_rows(space: SearchSpace, world: int, moe_overlap: str = "none") -> list[tuple[int, ...]]:
    """``(W, t, p, v, c, e, d, b, uneven, t_e)`` rows of one GPU count (structural rules only)."""
    spec, s, B, G = space.spec, space.seq, space.global_batch, space.gpus_per_node
    Lr, n_q, n_kv, E = spec.layers, spec.heads, spec.n_kv, spec.experts
    rows = []
    tp_fixed = space.fix("tp")
    for t in _allowed(space, "tp", _divisors(world)):
        if tp_fixed is None and t > G:
            continue
        if n_q % t or (n_kv % t and t % n_kv):
            continue
        for p in _allowed(space, "pp", _divisors(world // t)):
            if p > Lr:
                continue
            for c in _allowed(space, "cp", _divisors(world // (t * p))):
                if c > 1 and s % (2 * c):
                    continue
                d = world // (t * p * c)
                if space.fix("dp") is not None and d != space.fix("dp"):
                    continue
                if B % d:
                    continue
                eps = [e for e in _divisors(E) if (t * d * c) % e == 0] if E else [1]
                for e in _allowed(space, "ep", eps):
                    for b in _allowed(space, "micro_batch", _divisors(B // d)):
                        m = B // (b * d)
                        vps = [1] if p == 1 else [v for v in range(1, Lr // p + 1) if v == 1 or m % p == 0]
                        for v in _allowed(space, "vp", vps):
                            uneven = Lr % (p * v) != 0
                            if uneven and space.even_pipeline_only:
                                continue
                            if (moe_overlap == "1f1b" and p > 1 and v == 1) or (moe_overlap == "dualpipe" and p % 2):
                                continue
                            for te in _expert_tps(space, t, d, c, e):
                                rows.append((world, t, p, v, c, e, d, b, int(uneven), te))
    return rows


def count_upper_bound(space: SearchSpace) -> int:
    """At most how many configurations :func:`enumerate_space` yields over ``space.gpus``, counted
    without enumerating them: the structural rows of :func:`_base_rows` (its loops, with the ``v``
    loop counted arithmetically) times the categorical combinations (``sp``, recompute, ZeRO, cap),
    before the per-row filters that only remove some. The CLI refuses a space past its limit with it."""
    spec, s, B, G = space.spec, space.seq, space.global_batch, space.gpus_per_node
    Lr, n_q, n_kv, E = spec.layers, spec.heads, spec.n_kv, spec.experts
    vp_fixed = space.fix("vp")
    caps = len(BUCKET_CAPS_MIB) if space.fix("bucket_mb") is None else 1
    combos = sum((caps if z < 3 else 1) for _ in _allowed(space, "sp", (0, 1))
                 for _ in _allowed(space, "recompute", (0, 1, 2)) for z in _allowed(space, "zero", (0, 1, 2, 3)))
    tp_fixed = space.fix("tp")
    rows = 0
    for world in space.gpus:
        if space.fix("gpus") not in (None, world):
            continue
        for t in _allowed(space, "tp", _divisors(world)):
            if (tp_fixed is None and t > G) or n_q % t or (n_kv % t and t % n_kv):
                continue
            for p in _allowed(space, "pp", _divisors(world // t)):
                if p > Lr:
                    continue
                for c in _allowed(space, "cp", _divisors(world // (t * p))):
                    d = world // (t * p * c)
                    if (c > 1 and s % (2 * c)) or (space.fix("dp") not in (None, d)) or B % d:
                        continue
                    eps = sum(len(_expert_tps(space, t, d, c, e)) for e in
                              _allowed(space, "ep", [e for e in _divisors(E) if (t * d * c) % e == 0] if E else [1]))
                    for b in _allowed(space, "micro_batch", _divisors(B // d)):
                        vs = 1 if p == 1 or (B // (b * d)) % p else Lr // p   # v = 1, or 1 .. L // p
                        if vp_fixed is not None:
                            vs = int(vp_fixed == 1 or (vp_fixed <= vs and vs > 1))
                        rows += eps * vs
    return rows * combos


AUTO_PARTS = ("auto", *STACKS[1:])
"""The parts ``--stack auto`` splits the space into (:func:`commcost.workload.stacks.auto_masks`): the layouts the stack
its rule implies runs, then those each other of today's stacks is the first to run."""


def enumerate_space(space: SearchSpace, world: int, moe_overlap: str = "none", stack: str = "auto",
                    auto_part: str | None = None):
    """Every configuration of GPU count ``world`` as numpy columns: ``(base, cols)``.

    ``base`` holds the structural rows (``W t p v c e d b m uneven etp``, a few thousand, enumerated in
    Python); ``cols`` every configuration: ``bi`` the row of ``base`` it expands, ``sp``, ``rc`` the
    :data:`RECOMPUTE` code, ``zero``, ``capi`` the index of its cap in :func:`bucket_caps_bytes` and
    ``cap`` the cap in bytes (0: DDP's default, or no buckets run), one numpy mask per categorical combination;
    ``stack`` (not ``auto``) keeps only the layouts that stack runs (module docstring); ``auto`` those the stack its
    rule implies runs, and ``auto_part`` (a stack name) those ``--stack auto`` resolves to that stack
    (:func:`commcost.workload.stacks.auto_masks`): a layout is priced only by a stack that runs it. ``auto_part="*"``
    (with ``auto``): every layout some stack runs, ``cols["part"]`` the index in :data:`AUTO_PARTS` of its part."""
    import numpy as np


    rows = _base_rows(space, world, moe_overlap) if space.fix("gpus") in (None, world) else []
    names = ("W", "t", "p", "v", "c", "e", "d", "b", "uneven", "etp")
    caps = list(BUCKET_CAPS_MIB) if space.fix("bucket_mb") is None else [space.fix("bucket_mb")]
    combos = [(sp, rc, z, ci) for sp in _allowed(space, "sp", (0, 1)) for rc in _allowed(space, "recompute", (0, 1, 2))
              for z in _allowed(space, "zero", (0, 1, 2, 3)) for ci in (range(len(caps)) if z < 3 else [0])]
    empty = np.zeros(0, dtype=np.int64)
    if not rows or not combos:
        base = {k: empty for k in (*names, "m")}
        return base, {k: empty for k in ("sp", "rc", "zero", "cap", "bi", "capi") + (("part",) if auto_part == "*" else ())}
    arr = np.array(rows, dtype=np.int64)
    base = {k: arr[:, i] for i, k in enumerate(names)}
    base["m"] = space.global_batch // (base["b"] * base["d"])
    t, c, d, e = base["t"], base["c"], base["d"], base["e"]
    expert_tp = base["etp"]
    shared = (d * c > 1) | (expert_data_parallel(tp=t, dp=d, cp=c, ep=e, expert_tp=expert_tp) > 1
                            if space.spec.experts else False)
    sp_ok = (t > 1) & ((space.seq // c) % t == 0)
    rules = stack_layouts(stack)
    cap_bytes = np.array(caps, dtype=np.int64) * MiB
    parts: dict[str, list] = {k: [] for k in ("bi", "sp", "rc", "zero", "capi", "cap")}
    if auto_part == "*":
        parts["part"] = []
    for sp, rc, z, ci in combos:
        ok = np.ones(len(t), dtype=bool) if sp == 0 else sp_ok
        if z:
            ok = ok & shared
        if rules is not None:
            ok = ok & layout_runs(rules, tp=t, pp=base["p"], vp=base["v"], cp=c, ep=e, zero=z, sp=sp,
                                  recompute=RECOMPUTE[rc], micro_batches=base["m"])
        part = None
        if rules is None or auto_part is not None:
            masks = auto_masks(tp=t, pp=base["p"], vp=base["v"], cp=c, ep=e, zero=z, sp=sp, recompute=RECOMPUTE[rc],
                               micro_batches=base["m"])
            if auto_part == "*":       # every layout some stack runs, with the part that prices it (AUTO_PARTS)
                ok = ok & ~masks["none"]
                part = np.zeros(len(t), dtype=np.int64)
                for k, name in enumerate(AUTO_PARTS[1:], start=1):
                    part = np.where(masks[name], k, part)
            else:
                ok = ok & masks[auto_part or "auto"]
        bucketed = shared & (z < 3)
        if ci:
            ok = ok & bucketed                     # the cap only matters where buckets run
        bi = np.nonzero(ok)[0]
        parts["bi"].append(bi)
        if auto_part == "*":
            parts["part"].append(part[bi])
        parts["cap"].append(np.where(bucketed[bi], cap_bytes[ci], 0))
        for key, value in (("sp", sp), ("rc", rc), ("zero", z), ("capi", ci)):
            parts[key].append(np.full(len(bi), value, dtype=np.int64))
    return base, {k: np.concatenate(v) for k, v in parts.items()}


def bucket_caps_bytes(space: SearchSpace) -> tuple[int, ...]:
    """The caps ``capi`` indexes, bytes (0: DDP's default)."""

    caps = BUCKET_CAPS_MIB if space.fix("bucket_mb") is None else (space.fix("bucket_mb"),)
    return tuple(int(c * MiB) for c in caps)
