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

Not searched: the rank order (``--order``, default ``tp-cp-ep-dp-pp``), TP communication overlap and flash
attention are inputs of the whole search, as ``plan``'s flags; hybrid sharding stays at ``plan``'s default (none).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from commcost.core.errors import InputError
from commcost.core.units import MiB
from commcost.core.limits import MAX_GLOBAL_BATCH, MAX_GPUS, MAX_SEQ
from commcost.core.validation import require_at_most, require_count
from commcost.parallel.layout import Recompute, expert_data_parallel
from commcost.workload.stacks import STACKS, auto_masks, layout_runs
from commcost.workload.stacks import recipe_tp_comm_overlap, stack_layouts, stack_refuses

TYPE_CHECKING = False
if TYPE_CHECKING:
    from numpy.typing import NDArray

    from commcost.workload.transformer import TransformerSpec

__all__ = ["Choices", "GridColumns", "BUCKET_CAPS_MIB", "RECOMPUTE", "FIXABLE", "SearchSpace", "enumerate_space", "enumerate_parts", "bucket_caps_bytes", "parse_fix",
           "count_upper_bound", "stack_refusal", "stack_parts"]

BUCKET_CAPS_MIB = (0, 100, 400)
"""Bucket caps searched, MiB; 0 is DDP's default (``bucket_cap_mb=None``: first bucket 1 MiB, then 25)."""
RECOMPUTE = tuple(Recompute)
"""Recomputation choices (:class:`commcost.parallel.layout.Recompute`), in column code order (0, 1, 2)."""
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
        require_at_most("seq", self.seq, MAX_SEQ, "tokens")
        require_count("global_batch", self.global_batch)
        require_at_most("global_batch", self.global_batch, MAX_GLOBAL_BATCH, "sequences")
        require_count("gpus_per_node", self.gpus_per_node)
        if not self.gpus:
            raise InputError("no GPU count to search")
        for w in self.gpus:
            require_count("gpus", w)
            require_at_most("gpus", w, MAX_GPUS)
        for key, _ in self.fixed:
            if key not in FIXABLE:
                raise InputError(f"cannot fix {key!r} (valid: {', '.join(FIXABLE)})")

    def fix(self, key: str) -> int | None:
        """The value ``key`` is fixed at, or None."""
        for k, v in self.fixed:
            if k == key:
                return v
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Choices:
    """Configurations as columns (numpy integer arrays of one length): the structural row each expands and its
    categorical choices. What the step and memory kernels read; :class:`GridColumns` adds the bucket cap."""

    bi: NDArray
    """Index of the structural row (``base`` of :func:`enumerate_space`) the configuration expands."""
    sp: NDArray
    """Sequence parallelism: 0 or 1."""
    rc: NDArray
    """Recomputation: its code in :data:`RECOMPUTE`."""
    zero: NDArray
    """ZeRO stage, 0-3."""

    def __len__(self) -> int:
        return len(self.bi)

    @classmethod
    def every_row(cls, rows: int, *, zero: int) -> Choices:
        """One configuration per structural row ``0 .. rows - 1`` at ZeRO stage ``zero`` (no SP, no recomputation):
        what a per-row table needs to know which stack prices a row (:func:`commcost.analyses.plan.grid_memory.stack_masks`)."""
        import numpy as np

        empty = np.zeros(rows, dtype=np.int64)
        return cls(bi=np.arange(rows), sp=empty, rc=empty, zero=np.full(rows, zero))


@dataclass(frozen=True, slots=True, kw_only=True)
class GridColumns(Choices):
    """Every configuration of a space as columns (:func:`enumerate_space`): :class:`Choices` and the bucket cap."""

    capi: NDArray
    """Index of the cap in :func:`bucket_caps_bytes`."""
    cap: NDArray
    """The cap, bytes (0: DDP's default, or no buckets run)."""

    def take(self, index) -> GridColumns:
        """The configurations at ``index`` (a slice, a boolean mask or indices)."""
        return GridColumns(**{f.name: getattr(self, f.name)[index] for f in fields(self)})


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


def _expand(rows: dict, name: str, values, counts=None) -> dict:
    """Each row of the columns ``rows`` once per value of ``values`` (the same values for every row), or with
    ``counts`` once per value of its own run of ``values`` (``len(values) == counts.sum()``): loops nested
    in the order the columns were added, rows first, as the loops they replace."""
    import numpy as np

    n = len(next(iter(rows.values())))
    if counts is None:
        counts = np.full(n, len(values), dtype=np.int64)
        values = np.tile(values, n)
    out = {k: np.repeat(col, counts) for k, col in rows.items()}
    out[name] = values
    return out


def _keep(rows: dict, mask) -> dict:
    return {k: col[mask] for k, col in rows.items()}


def _base_rows(space: SearchSpace, world: int, moe_overlap: str = "none") -> dict:
    """Columns ``W t p v c e d b uneven etp m`` of the structural rows of one GPU count (structural rules only,
    module docstring), built as arrays: each dimension multiplies the rows by its candidate values and a mask
    keeps the valid ones, in the order of the nested loops ``t, p, c, e, b, v, t_e`` (the order ties are
    broken by). ``t_e`` is Megatron's default (``t`` where ``e`` divides ``d c``, else 1), then 1 where that
    differs and ``e > 1``; ``--fix etp=N`` keeps ``N`` where ``e N`` divides ``t d c``."""
    import numpy as np

    spec, s, B, G = space.spec, space.seq, space.global_batch, space.gpus_per_node
    Lr, n_q, n_kv, E = spec.layers, spec.heads, spec.n_kv, spec.experts
    divs = np.array(_divisors(world), dtype=np.int64)

    def allowed(key: str, values):
        v = space.fix(key)
        return values[values == v] if v is not None else values

    t = allowed("tp", divs)
    if space.fix("tp") is None:
        t = t[t <= G]
    t = t[(n_q % t == 0) & ((n_kv % t == 0) | (t % n_kv == 0))]
    rows = _expand({"W": np.full(len(t), world, dtype=np.int64)}, "t", t, np.ones(len(t), dtype=np.int64))
    rows = _expand(rows, "p", allowed("pp", divs))
    rows = _keep(rows, ((world // rows["t"]) % rows["p"] == 0) & (rows["p"] <= Lr))
    rows = _expand(rows, "c", allowed("cp", divs))
    t, p, c = rows["t"], rows["p"], rows["c"]
    rows = _keep(rows, ((world // (t * p)) % c == 0) & ((c == 1) | (s % (2 * c) == 0)))
    rows["d"] = world // (rows["t"] * rows["p"] * rows["c"])
    d = rows["d"]
    ok = B % d == 0
    if space.fix("dp") is not None:
        ok &= d == space.fix("dp")
    rows = _keep(rows, ok)
    rows = _expand(rows, "e", allowed("ep", np.array(_divisors(E) if E else [1], dtype=np.int64)))
    rows = _keep(rows, (rows["t"] * rows["d"] * rows["c"]) % rows["e"] == 0)
    rows = _expand(rows, "b", allowed("micro_batch", np.array(_divisors(B), dtype=np.int64)))
    rows = _keep(rows, (B // rows["d"]) % rows["b"] == 0)
    p, m = rows["p"], B // (rows["b"] * rows["d"])
    counts = np.where((p == 1) | (m % p != 0), 1, Lr // p)            # v = 1, or 1 .. L // p
    start = np.cumsum(counts) - counts
    v = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(start, counts) + 1
    rows = _expand(rows, "v", v, counts)
    p, v = rows["p"], rows["v"]
    uneven = Lr % (p * v) != 0
    ok = np.ones(len(v), dtype=bool)
    if space.fix("vp") is not None:
        ok &= v == space.fix("vp")
    if space.even_pipeline_only:
        ok &= ~uneven
    if moe_overlap == "1f1b":
        ok &= ~((p > 1) & (v == 1))
    elif moe_overlap == "dualpipe":
        ok &= p % 2 == 0
    rows = _keep(rows, ok)
    rows["uneven"] = (Lr % (rows["p"] * rows["v"]) != 0).astype(np.int64)
    t, d, c, e = rows["t"], rows["d"], rows["c"], rows["e"]
    fixed = space.fix("etp")
    if fixed is not None:
        counts = ((t * d * c) % (e * fixed) == 0).astype(np.int64)
        values = np.full(int(counts.sum()), fixed, dtype=np.int64)
    else:
        default = np.where((d * c) % e == 0, t, 1)
        counts = np.where((default != 1) & (e > 1), 2, 1)
        values = np.ones(int(counts.sum()), dtype=np.int64)
        values[np.cumsum(counts) - counts] = default                  # each row's first value: the default
    rows = _expand(rows, "etp", values, counts)
    rows["m"] = B // (rows["b"] * rows["d"])
    return rows


def _expert_tp_count(space: SearchSpace, t: int, d: int, c: int, e: int) -> int:
    """How many ``t_e`` :func:`_base_rows` keeps for one ``(t, d, c, e)``."""
    fixed = space.fix("etp")
    if fixed is not None:
        return int((t * d * c) % (e * fixed) == 0)
    default = t if (d * c) % e == 0 else 1
    return 2 if default != 1 and e > 1 else 1


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
                    eps = sum(_expert_tp_count(space, t, d, c, e) for e in
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

    ``base`` holds the structural rows (``W t p v c e d b m uneven etp``, a few thousand, :func:`_base_rows`);
    ``cols`` (:class:`GridColumns`) every configuration, one numpy mask per categorical combination;
    ``stack`` (not ``auto``) keeps only the layouts that stack runs (module docstring); ``auto`` those the stack its
    rule implies runs, and ``auto_part`` (a stack name) those ``--stack auto`` resolves to that stack
    (:func:`commcost.workload.stacks.auto_masks`): a layout is priced only by a stack that runs it."""
    return enumerate_parts(space, world, moe_overlap, stack, (auto_part,))[0]


def enumerate_parts(space: SearchSpace, world: int, moe_overlap: str = "none", stack: str = "auto",
                    auto_parts: tuple = (None,)) -> list:
    """:func:`enumerate_space` of each of ``auto_parts``, ``[(base, cols), ...]`` in that order, the structural rows
    and the stacks' masks computed once for all of them (the parts of ``--stack auto`` split one space)."""
    import numpy as np

    names = ("W", "t", "p", "v", "c", "e", "d", "b", "uneven", "etp", "m")
    caps = list(BUCKET_CAPS_MIB) if space.fix("bucket_mb") is None else [space.fix("bucket_mb")]
    combos = [(sp, rc, z, ci) for sp in _allowed(space, "sp", (0, 1)) for rc in _allowed(space, "recompute", (0, 1, 2))
              for z in _allowed(space, "zero", (0, 1, 2, 3)) for ci in (range(len(caps)) if z < 3 else [0])]
    empty = np.zeros(0, dtype=np.int64)
    base = _base_rows(space, world, moe_overlap) if space.fix("gpus") in (None, world) else None
    if base is None or not len(base["t"]) or not combos:
        base = {k: empty for k in names}
        return [(base, GridColumns(bi=empty, sp=empty, rc=empty, zero=empty, capi=empty, cap=empty))
                for _ in auto_parts]
    base = {k: base[k] for k in names}
    t, c, d, e = base["t"], base["c"], base["d"], base["e"]
    expert_tp = base["etp"]
    shared = (d * c > 1) | (expert_data_parallel(tp=t, dp=d, cp=c, ep=e, expert_tp=expert_tp) > 1
                            if space.spec.experts else False)
    sp_ok = (t > 1) & ((space.seq // c) % t == 0)
    rules = stack_layouts(stack)
    cap_bytes = np.array(caps, dtype=np.int64) * MiB
    bucketed = shared & True                      # ZeRO 0-2: the cap only matters where buckets run
    runs: dict = {}                               # (sp, rc, z) -> the layouts the stack runs (or auto's masks)
    out = []
    for auto_part in auto_parts:
        parts: dict[str, list] = {k: [] for k in ("bi", "cap")}
        counts = []
        for sp, rc, z, ci in combos:
            if (sp, rc, z) not in runs:          # the cap does not change which stack runs a layout
                ok = np.ones(len(t), dtype=bool) if sp == 0 else sp_ok
                if z:
                    ok = ok & shared
                if rules is not None:
                    ok = ok & layout_runs(rules, tp=t, pp=base["p"], vp=base["v"], cp=c, ep=e, zero=z, sp=sp,
                                          recompute=RECOMPUTE[rc], micro_batches=base["m"])
                masks = None
                if rules is None or any(part is not None for part in auto_parts):
                    masks = auto_masks(tp=t, pp=base["p"], vp=base["v"], cp=c, ep=e, zero=z, sp=sp,
                                       recompute=RECOMPUTE[rc], micro_batches=base["m"])
                runs[sp, rc, z] = (ok, masks, {})
            ok, masks, rows_of = runs[sp, rc, z]
            key = (auto_part, ci > 0 and z < 3)
            if key not in rows_of:
                part_ok = ok & masks[auto_part or "auto"] if rules is None or auto_part is not None else ok
                if key[1]:
                    part_ok = part_ok & bucketed
                bi = np.nonzero(part_ok)[0]
                rows_of[key] = (bi, bucketed[bi] if z < 3 else np.zeros(len(bi), dtype=bool))
            bi, bucket_rows = rows_of[key]
            parts["bi"].append(bi)
            parts["cap"].append(np.where(bucket_rows, cap_bytes[ci], 0))
            counts.append(len(bi))
        # each combination's constant columns, one repeat each (not a full column per combination, then joined)
        constant = {k: np.repeat(np.array([combo[i] for combo in combos], dtype=np.int64), counts)
                    for i, k in enumerate(("sp", "rc", "zero", "capi"))}
        out.append((base, GridColumns(**{k: np.concatenate(v) for k, v in parts.items()}, **constant)))
    return out


def stack_refusal(stack: str, fixed: tuple[tuple[str, int], ...]) -> str | None:
    """Why ``stack`` runs no layout with the ``fixed`` dimensions (``--fix``), or None
    (:func:`commcost.workload.stacks.stack_refuses`, the first rule ``plan --stack NAME`` refuses a layout by:
    :func:`commcost.workload.stacks.layout_refusal`); ``auto`` runs every layout."""
    return stack_refuses(stack_layouts(stack), dict(fixed))


def stack_parts(stack: str, fixed: tuple[tuple[str, int], ...], tp_comm_overlap: bool) -> list[tuple[str, bool, str | None]]:
    """``[(stack priced, TP overlap, auto_part)]``, the parts :func:`enumerate_parts` splits a space into: a named
    stack, one part, its layouts; ``auto``, the layouts the stack its rule implies runs (``auto_part`` None, priced as
    ``auto``), then for each other stack of :data:`commcost.workload.stacks.STACKS` that runs a layout of ``fixed``
    (:func:`stack_refusal`) the layouts ``auto`` resolves to it (:func:`commcost.workload.stacks.auto_masks`), priced
    as that stack. Each part with TP communication overlap where asked or where that stack's recipes run it
    (``stacks.json`` ``recipe_tp_comm_overlap``); ``auto``'s own part at the overlap asked, its recipe overlap row by
    row as the stack each row implies (:func:`commcost.analyses.plan.grid_memory.tp_overlap_column`)."""

    def overlap(name: str) -> bool:
        return tp_comm_overlap or recipe_tp_comm_overlap(name)

    if stack != "auto":
        return [(stack, overlap(stack), None)]
    return [("auto", tp_comm_overlap, None)] \
        + [(name, overlap(name), name) for name in STACKS[1:]
           if stack_refusal(name, fixed) is None]   # a stack that runs none is no part


def bucket_caps_bytes(space: SearchSpace) -> tuple[int, ...]:
    """The caps ``capi`` indexes, bytes (0: DDP's default)."""

    caps = BUCKET_CAPS_MIB if space.fix("bucket_mb") is None else (space.fix("bucket_mb"),)
    return tuple(int(c * MiB) for c in caps)


def fixes_admitting_nothing(space: SearchSpace) -> tuple[tuple[str, int], ...]:
    """The ``--fix`` pairs to blame when ``space`` holds no layout that it would hold without them:
    the first pair that alone empties it, else all of them together; ``()`` when the space has a
    layout, or has none even without any fix (:func:`count_upper_bound`; then no fix is at fault)."""
    if not space.fixed or count_upper_bound(space) > 0:
        return ()
    for i, pair in enumerate(space.fixed):
        if count_upper_bound(replace(space, fixed=space.fixed[:i] + space.fixed[i + 1:])) > 0:
            return (pair,)
    return space.fixed if count_upper_bound(replace(space, fixed=())) > 0 else ()
