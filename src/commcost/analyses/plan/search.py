"""``commcost search``: the best parallel configuration of a model on a cluster, over every valid layout.

A composition (DESIGN.md): :mod:`commcost.analyses.plan.space` enumerates the layouts,
:mod:`commcost.analyses.plan.grid` prices all of them at once with ``plan``'s own kernels (:mod:`commcost.analyses.plan.compose`) on numpy arrays
(each distinct collective through the one CommModel once), drops those whose memory exceeds the GPU,
ranks the rest by the objective and re-prices the top ones with :func:`commcost.analyses.plan.plan.plan` itself,
so every number printed for a configuration is the number ``commcost plan`` prints for it.

Objectives (smaller is better after the sign): ``step`` the step time; ``tokens-per-gpu``
``B s / (step W)`` (largest first); ``cost`` dollars per million tokens ``= 1e6 price W step /
(3600 B s)`` with ``price`` per GPU-hour (it ranks as ``tokens-per-gpu``: both are ``W step``).

numpy is needed (``pip install 'commcost[sweep]'``); nothing here imports it before :func:`search` runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from commcost.analyses.plan.search_inputs import OBJECTIVES, SearchInputs
from commcost.analyses.plan.space import RECOMPUTE, SearchSpace, bucket_caps_bytes, enumerate_parts, parse_fix
from commcost.analyses.plan.space import stack_parts
from dataclasses import replace
from commcost.analyses.plan.grid import Pricer
from commcost.analyses.plan.grid import distinct_keys
from commcost.analyses.plan.grid import evaluate_grid
from commcost.analyses.plan.grid import needed as uses
from commcost.analyses.plan.grid import price_base
from commcost.analyses.plan.grid import structure
from commcost.analyses.plan.grid_memory import memory_grid
from commcost.analyses.plan.grid_memory import memory_tables
from commcost.analyses.plan.grid_memory import tp_overlap_column
from commcost.analyses.plan.plan import PlanInputs
from commcost.analyses.plan.plan import plan
from commcost.analyses.plan.training_cost import usd_per_million_tokens
from commcost.analyses.plan.band import plan_band
from commcost.core.heap import kept_heap
from commcost.core.optional import require
from commcost.step.bucket_advice import recommend_buckets
from commcost.parallel.layout import Layout

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    from commcost.comm.model import CommModel
    from commcost.analyses.plan.plan import Plan, PlanInputs

__all__ = ["OBJECTIVES", "SearchSpace", "SearchInputs", "SearchResult", "search", "evaluate_all", "parse_fix", "plan_inputs_of",
           "objective_value", "rank_robust", "robust_candidates", "RANKS", "on_front"]

RANKS = ("step", "robust", "cost")
"""``--rank`` values: the step, the step at the measured band's upper edge (:func:`rank_robust`), dollars."""

CHUNK_ROWS = 1 << 18
"""Configurations priced per numpy pass (progress and Ctrl-C act between passes)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """What a search found."""

    inputs: SearchInputs
    """What was searched."""
    evaluated: int
    """Configurations enumerated and checked (memory of every one; the step of those that fit)."""
    feasible: int
    """Of those, configurations that fit in memory."""
    priced: int
    """Configurations whose step was computed (all that fit, unless interrupted)."""
    over_by_states: int
    """Infeasible because the model states (weights, gradients, optimizer) alone exceed the GPU."""
    over_by_activations: int
    """Infeasible because activations and buffers push the states over the GPU's memory."""
    elapsed_s: float
    """Wall time of the search, seconds (enumeration, pricing, re-pricing the top ones)."""
    plans: tuple[Plan, ...]
    """The best configurations, best first, each priced by :func:`commcost.analyses.plan.plan.plan`."""
    grid_step_s: tuple[float, ...]
    """The grid's step of each of :attr:`plans` (equal to the plan's to rounding)."""
    distinct_collectives: int
    """Distinct ``(op, size, group, ranks per node)`` the CommModel priced."""
    grid_cap_bytes: tuple = ()
    """The bucket cap each of :attr:`plans` was ranked at on the grid (None: DDP's default); each plan is priced at
    its bucket advice's cap (:func:`advised`), what its ``plan_command`` carries."""
    interrupted: bool = False
    """Ctrl-C stopped it: the results are the best of what was evaluated."""
    points: dict | None = field(default=None)
    """With ``keep_points``: arrays ``step_s, memory_bytes, memory_high_bytes, gpus`` of every feasible configuration
    (``memory_high_bytes``: the upper end of what the card holds, :func:`commcost.workload.memory.memory_high_bytes`,
    what fragility and the front are judged on)."""
    robust_step_s: tuple[float, ...] | None = None
    """With :func:`rank_robust`: each plan's step at its measured band's upper edge (every collective at
    its class's slowest measured cluster), the key the plans are ranked by; None otherwise."""
    bands: tuple | None = None
    """With :func:`rank_robust`: each plan's :class:`commcost.analyses.plan.band.PlanBand` (None: no communication)."""
    fragile: tuple[bool, ...] = ()
    """Each plan's memory leaves less than the headroom free at its upper end
    (:func:`commcost.workload.memory.memory_fragile`)."""
    fastest: Plan | None = None
    """The configuration of best objective among all that fit, fragile or not (the fastest nominal step
    for ``step``): the one the winner is compared with; it may be left out of :attr:`plans`."""
    fastest_fragile: bool = False
    """:attr:`fastest` is fragile (:attr:`fragile`)."""
    fastest_robust_step_s: float | None = None
    """With :func:`rank_robust`: :attr:`fastest`'s step at its band's upper edge."""
    pareto: tuple[bool, ...] | None = None
    """With :func:`rank_robust`: each plan is on the Pareto front of the ranked step (the band's upper
    edge, or the step without a band) against memory among the re-ranked plans: no other has both at
    most its own, one of them smaller."""


def objective_value(objective: str, step_s, gpus, tokens_per_step: float, price_per_gpu_hour: float = 0.0):
    """The ranked quantity, smaller first: step ``s``; ``-B s/(step W)``; dollars per million tokens
    ``1e6 price W step / (3600 B s)`` (module docstring). Array-safe."""
    if objective == "step":
        return step_s
    if objective == "tokens-per-gpu":
        return -tokens_per_step / (step_s * gpus)

    return usd_per_million_tokens(price_per_gpu_hour, tokens_per_step / (step_s * gpus))


def search_passes(inp: SearchInputs) -> list[tuple[SearchInputs, str | None]]:
    """The inputs each part of the space is priced under, with the ``auto_part`` of
    :func:`commcost.analyses.plan.space.enumerate_space`: the parts of
    :func:`commcost.analyses.plan.space.stack_parts`, each under its stack and TP overlap."""

    return [(replace(inp, stack=name, tp_comm_overlap=overlap, stack_from_auto=inp.stack_from_auto or part is not None), part)
            for name, overlap, part in stack_parts(inp.stack, inp.space.fixed, inp.tp_comm_overlap)]


def search_spaces(inp: SearchInputs, world: int) -> list:
    """``[(inputs, (base, cols))]``: the configurations of ``world`` GPUs, each part under the inputs that price it
    (:func:`search_passes`)."""
    passes = search_passes(inp)
    # one enumeration for all the parts (each a stack's share of auto's space, or one named stack's)
    spaces = enumerate_parts(inp.space, world, inp.moe_overlap, inp.stack, tuple(part for _, part in passes))
    return [(pinp, grid) for (pinp, _), grid in zip(passes, spaces)]


def advised(p: Plan, model: CommModel, inp: SearchInputs, memo: dict | None = None) -> Plan:
    """``p`` at the cap of its own bucket advice (:attr:`commcost.analyses.plan.plan.Plan.bucket_advice`, the one
    advice ``plan``, ``budget`` and ``timeline`` give), unless the cap is fixed (``--fix bucket_mb``) or no buckets run:
    the grid ranks at a few caps (:func:`commcost.analyses.plan.space.bucket_caps_bytes`), the result is priced at the
    advised one, so its ``plan_command``'s ``--bucket-mb`` is the advice's ``recommended_bytes``.

    ``memo`` (a dict the caller keeps) holds the advised plan per layout without its cap: the advice sweeps the caps
    itself, so the cap ``p`` was priced at does not change it, and the grid's cap variants of one layout ask once."""
    if p.dp_timeline is None or inp.space.fix("bucket_mb") is not None:
        return p
    key = replace(p.inputs, bucket_cap_bytes=None)
    if memo is not None and key in memo:
        rec, q = memo[key]
        return p if p.inputs.bucket_cap_bytes == rec else q
    # Plan.bucket_advice, the sweep's collectives priced as arrays first (search has numpy; the same advice)
    rec = recommend_buckets(p.dp_timeline[0], allreduce_s=p.dp_timeline[1], arrays=True).recommended_bytes
    q = p if p.inputs.bucket_cap_bytes == rec else plan(replace(p.inputs, bucket_cap_bytes=rec), model)
    if memo is not None:
        memo[key] = (rec, q)
    return q


def plan_inputs_of(inp: SearchInputs, row: dict) -> PlanInputs:
    """The :class:`~commcost.analyses.plan.plan.PlanInputs` of one grid row (``commcost plan`` with these flags prices it)."""

    sp = inp.space
    layout = Layout(dp=int(row["d"]), tp=int(row["t"]), pp=int(row["p"]), vp=int(row["v"]), cp=int(row["c"]),
                    ep=int(row["e"]), zero=int(row["zero"]), sequence_parallel=bool(row["sp"]),
                    recompute=RECOMPUTE[int(row["rc"])], micro_batch=int(row["b"]), global_batch=sp.global_batch,
                    uneven_pipeline=bool(row["uneven"]), etp=int(row["etp"]) if sp.spec.is_moe else 0,
                    order=inp.order)
    return PlanInputs(spec=sp.spec, layout=layout, seq=sp.seq, gpu=inp.gpu, gpus_per_node=sp.gpus_per_node,
                      precision=inp.precision, efficiency=inp.efficiency, flash_attention=inp.flash_attention,
                      activation_bytes=inp.activation_bytes, grad_bytes=inp.grad_bytes, bucket_cap_bytes=int(row["cap"]) or None,
                      tp_comm_overlap=bool(row.get("tpo", inp.tp_comm_overlap)),
                      stack=inp.stack, compiled=inp.compiled, fp8_attention=inp.fp8_attention, a2a=inp.a2a,
                      fp8_dispatch=inp.fp8_dispatch, moe_overlap=inp.moe_overlap, expert_load=inp.expert_load,
                      cpu_offload_layers=inp.cpu_offload_layers)   # its plan_flags carry what search assumed


class _Top:
    """The ``top`` rows of smallest key seen so far, ties in enumeration order (``order``, a running index)."""

    def __init__(self, np, top: int) -> None:
        self.np, self.top = np, top
        self.keys = self.steps = self.order = np.zeros(0)
        self.rows: dict = {}

    def add(self, keys, steps, order, take: Callable[[object], dict]) -> None:
        """Offer new rows: their keys, grid steps, running order, and ``take(index)`` the columns of the
        new rows at ``index`` (called for the candidates only, not every row offered)."""
        np = self.np
        if not len(keys):
            return
        old = len(self.keys)
        keys = np.concatenate([self.keys, keys])
        if len(keys) > self.top:
            kth = np.partition(keys, self.top - 1)[self.top - 1]
            cand = np.nonzero(keys <= kth)[0]
        else:
            cand = np.arange(len(keys))
        steps, order = np.concatenate([self.steps, steps]), np.concatenate([self.order, order])
        keep = cand[np.lexsort((order[cand], keys[cand]))][:self.top]
        was = keep < old
        rows = take(keep[~was] - old)            # the new rows kept, in keep's order
        merged = {}
        for c, col in rows.items():
            merged[c] = np.empty(len(keep), dtype=col.dtype)
            merged[c][~was] = col
            if was.any():
                merged[c][was] = self.rows[c][keep[was]]
        self.rows = merged
        self.keys, self.steps, self.order = keys[keep], steps[keep], order[keep]

    def entries(self) -> list[tuple[float, float, float, dict]]:
        """``(key, grid step, order, row)`` best first."""
        return [(float(self.keys[i]), float(self.steps[i]), float(self.order[i]),
                 {c: col[i] for c, col in self.rows.items()}) for i in range(len(self.keys))]


def _ranked(pools: dict, inp: SearchInputs, model: CommModel, wide: int, tokens: float):
    """The grid's best (safe, then fragile where ``inp.fragile_last``) planned and advised, one per layout:
    ``(chosen, grid_inputs, plans, flags, order, fastest)``, ``order`` the first ``top`` by the objective."""
    safe, risky = pools[False].entries(), pools[True].entries()
    if inp.fragile_last:
        chosen = safe + risky[:max(wide - len(safe), 1 if risky and safe and risky[0][0] < safe[0][0] else 0)]
    else:
        chosen = sorted(safe + risky, key=lambda e: (e[0], e[2]))[:wide]
    grid_inputs = [plan_inputs_of(inp, row) for _, _, _, row in chosen]
    memo: dict = {}
    # a layout already advised at another cap is that plan (plan at the advised cap, or the same inputs)
    plans = [memo[key][1] if (key := replace(x, bucket_cap_bytes=None)) in memo else
             advised(plan(x, model), model, inp, memo) for x in grid_inputs]
    first: dict = {}                          # cap variants of one layout advised to one cap: the first stays
    distinct = [first.setdefault(p.inputs, i) for i, p in enumerate(plans) if p.inputs not in first]
    chosen, grid_inputs, plans = ([x[i] for i in distinct] for x in (chosen, grid_inputs, plans))
    flags = [p.memory.fragile(inp.headroom) for p in plans]

    def rank_key(i: int):
        value = objective_value(inp.objective, plans[i].step_s, plans[i].inputs.layout.world, tokens,
                                inp.price_per_gpu_hour)
        return (flags[i], value, chosen[i][2]) if inp.fragile_last else (value, chosen[i][2])

    order = sorted(range(len(plans)), key=rank_key)
    fastest = min(range(len(plans)), key=lambda i: (rank_key(i)[-2], chosen[i][2]), default=None)
    if inp.fragile_last and sum(not f for f in flags) >= inp.top and fastest is not None and flags[fastest]:
        order = [i for i in order if i != fastest]   # kept only to say why it is not first
    order = order[:inp.top]
    return chosen, grid_inputs, plans, flags, order, fastest


@kept_heap()   # the grid's freed columns reused, not faulted in again (core/heap.py)
def search(inp: SearchInputs, model: CommModel, *,
           progress: Callable[[int, int, float], None] | None = None) -> SearchResult:
    """Enumerate, price, filter, rank (module docstring). ``progress(done, total, elapsed_s)`` is called
    after each numpy pass; Ctrl-C (KeyboardInterrupt) between or inside passes returns the best so far.

    The best ``top`` are kept apart for layouts that leave the memory headroom and for fragile ones
    (:func:`commcost.workload.memory.memory_fragile`); with ``inp.fragile_last`` the fragile
    ones come after every other (and only fill ``top``), else both are ranked together by the objective.
    """

    np = require("numpy", "sweep")

    start = time.perf_counter()
    space = inp.space
    tokens = space.global_batch * space.seq
    pricer = Pricer(model)
    caps = bucket_caps_bytes(space)
    evaluated = feasible = priced = over_states = over_act = 0
    # the grid ranks each cap of a layout apart; at its advice's cap (advised) they are one result: keep enough
    wide = inp.top * max(1, len(caps))
    pools = {False: _Top(np, wide), True: _Top(np, wide)}      # keyed by fragile
    points: dict[str, list] = {"step_s": [], "memory_bytes": [], "memory_high_bytes": [], "gpus": []}
    interrupted = False
    seen = 0
    try:
        grids = [x for w in space.gpus for x in search_spaces(inp, w)]
        total = sum(len(g) for _, (_, g) in grids)
        for pinp, (base, g) in grids:
            n = len(g)
            if not n:
                continue
            X = structure(base, space.spec, space.gpus_per_node, inp.order)
            tables = memory_tables(base, X, pinp)
            # pass 1: memory of every configuration (no prices needed); only what fits is priced
            fits = np.zeros(n, dtype=bool)
            fragile = np.zeros(n, dtype=bool)
            mem_all = np.zeros(n) if inp.keep_points else None
            high_all = np.zeros(n) if inp.keep_points else None
            for lo in range(0, n, CHUNK_ROWS):
                chunk = g.take(slice(lo, lo + CHUNK_ROWS))
                # memory does not depend on the bucket cap: once per distinct (row, sp, recompute, ZeRO)
                keys, back = distinct_keys(chunk, len(base["t"]), zero3_only=False)
                mem = memory_grid(keys, tables, pinp, base)
                ok = mem["fits"][back]             # the verdicts plan's MemoryBreakdown gives, on columns
                fits[lo:lo + CHUNK_ROWS] = ok
                fragile[lo:lo + CHUNK_ROWS] = mem["fragile"][back]
                if mem_all is not None:
                    mem_all[lo:lo + CHUNK_ROWS] = mem["memory_bytes"][back]
                    high_all[lo:lo + CHUNK_ROWS] = mem["device_high_bytes"][back]
                states_over = (mem["states_bytes"] + mem["device_low_bytes"] - mem["memory_low_bytes"]
                               > mem["capacity_bytes"])[back]
                evaluated += len(ok)
                feasible += int(ok.sum())
                over_states += int(states_over.sum())
                over_act += int((~ok & ~states_over).sum())
            # pass 2: price the structural rows that have a feasible configuration, then step times
            live = g.take(fits)
            live_fragile = fragile[fits]
            if mem_all is not None:
                live_mem, live_high = mem_all[fits], high_all[fits]
            needed = np.nonzero(np.bincount(live.bi, minlength=len(base["t"])))[0]
            sub = {k: col[needed] for k, col in base.items()}
            live = replace(live, bi=np.searchsorted(needed, live.bi))
            Xs = price_base(sub, {k: col[needed] for k, col in X.items()}, pinp, pricer, caps,
                            need=uses(live, len(needed), len(caps)))
            nl = len(live)
            done_before = evaluated - nl
            for lo in range(0, nl, CHUNK_ROWS):
                chunk = live.take(slice(lo, lo + CHUNK_ROWS))
                r = evaluate_grid(chunk, sub, Xs, pinp, breakdown=False)
                k = len(chunk)
                priced += k
                step = r["step_s"]
                W = sub["W"][chunk.bi]
                key = objective_value(inp.objective, step, W, tokens, inp.price_per_gpu_hour)
                if mem_all is not None:
                    points["step_s"].append(step)
                    points["memory_bytes"].append(live_mem[lo:lo + CHUNK_ROWS])
                    points["memory_high_bytes"].append(live_high[lo:lo + CHUNK_ROWS])
                    points["gpus"].append(W)

                def take(index, chunk=chunk):
                    """The columns ``plan_inputs_of`` reads, of the chunk's rows at ``index``."""
                    rows = {c: sub[c][chunk.bi[index]] for c in ("W", "t", "p", "v", "c", "e", "d", "b", "uneven",
                                                                    "etp")}
                    rows.update({c: getattr(chunk, c)[index] for c in ("sp", "rc", "zero", "cap")})
                    rows["tpo"] = np.broadcast_to(tp_overlap_column(chunk, sub, pinp), (len(chunk.bi),))[index]
                    return rows

                order = seen + np.arange(k, dtype=float)
                seen += k
                frag = live_fragile[lo:lo + CHUNK_ROWS]
                for flag, pool in pools.items():
                    sel = frag if flag else ~frag
                    idx = np.flatnonzero(sel)
                    pool.add(key[idx], step[idx], order[idx], lambda i, idx=idx, take=take: take(idx[i]))
                if progress is not None:
                    progress(done_before + lo + k, total, time.perf_counter() - start)
    except KeyboardInterrupt:
        interrupted = True
    chosen, grid_inputs, plans, flags, order, fastest = _ranked(pools, inp, model, wide, tokens)
    pts = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in points.items()} if inp.keep_points else None
    return SearchResult(inputs=inp, evaluated=evaluated, feasible=feasible, priced=priced, over_by_states=over_states,
                        over_by_activations=over_act, elapsed_s=time.perf_counter() - start,
                        plans=tuple(plans[i] for i in order), grid_step_s=tuple(chosen[i][1] for i in order),
                        grid_cap_bytes=tuple(grid_inputs[i].bucket_cap_bytes for i in order),
                        distinct_collectives=pricer.distinct, interrupted=interrupted, points=pts,
                        fragile=tuple(flags[i] for i in order),
                        fastest=None if fastest is None else plans[fastest],
                        fastest_fragile=False if fastest is None else flags[fastest])


ROBUST_CANDIDATES_PER_RESULT = 5
"""``rank_robust`` re-ranks this many times ``--top`` of the best steps (at least :data:`ROBUST_MIN_CANDIDATES`)."""
ROBUST_MIN_CANDIDATES = 50


def robust_candidates(top: int) -> int:
    """How many of the best steps :func:`rank_robust` re-ranks for ``top`` results."""
    return max(ROBUST_CANDIDATES_PER_RESULT * top, ROBUST_MIN_CANDIDATES)


def on_front(step_s: list[float], memory_bytes: list[float]) -> list[bool]:
    """For each point, whether no other has ``step <= `` and ``memory <=`` its own with one strictly smaller
    (the step/memory Pareto front; equal points are both on it). O(n^2) over the few plans re-ranked."""
    n = len(step_s)
    return [not any(step_s[j] <= step_s[i] and memory_bytes[j] <= memory_bytes[i]
                    and (step_s[j] < step_s[i] or memory_bytes[j] < memory_bytes[i]) for j in range(n))
            for i in range(n)]


def rank_robust(result: SearchResult, model: CommModel, topology, top: int) -> SearchResult:
    """Re-rank ``result``'s plans (the best steps, :func:`robust_candidates` of them) and keep ``top``:
    layouts that leave the memory headroom first (:attr:`SearchResult.fragile`), each group by the
    upper edge of the measured band (:func:`commcost.analyses.plan.band.plan_band`: every collective
    at its class's slowest measured cluster, exposure and bubble re-priced; with ``topology`` None, no
    band: the step), ties by less memory (the upper end of what the card holds, ``device_bytes[1]``, which
    fragility is judged on). :attr:`SearchResult.pareto` marks the plans on the front of that ranked step against
    that memory; the first is on it by construction (the least ranked step, the
    least memory among equals).

    A layout whose step hides a lot of traffic only just is fragile: its upper edge is far above its
    step, and it falls in this ranking."""

    def band(p):
        return None if topology is None else plan_band(p.inputs, p, model, topology)

    def upper_of(p, b):
        return p.step_s if b is None else b.step_s[1]

    plans = result.plans
    bands = [band(p) for p in plans]
    upper = [upper_of(p, b) for p, b in zip(plans, bands)]
    fragile = result.fragile or tuple(False for _ in plans)
    memory = [p.memory.device_bytes[1] for p in plans]   # what fragility is judged on: the card's upper end
    front = on_front(upper, memory)
    order = sorted(range(len(upper)), key=lambda i: (fragile[i], upper[i], memory[i], i))[:top]
    fastest_upper = None
    if result.fastest is not None:
        same = [i for i, p in enumerate(plans) if p is result.fastest]
        fastest_upper = upper[same[0]] if same else upper_of(result.fastest, band(result.fastest))
    return replace(result, plans=tuple(plans[i] for i in order),
                   grid_step_s=tuple(result.grid_step_s[i] for i in order),
                   robust_step_s=None if topology is None else tuple(upper[i] for i in order),
                   bands=None if topology is None else tuple(bands[i] for i in order),
                   fragile=tuple(fragile[i] for i in order), pareto=tuple(front[i] for i in order),
                   fastest_robust_step_s=None if topology is None else fastest_upper)


def evaluate_all(inp: SearchInputs, model: CommModel, world: int) -> tuple[dict, dict]:
    """Every configuration of GPU count ``world``, fitting or not: ``(rows, values)`` with ``rows`` the
    columns :func:`plan_inputs_of` reads and ``values`` the grid's step, breakdown and memory (tests and
    benchmarks compare them with :func:`commcost.analyses.plan.plan.plan`)."""

    np = require("numpy", "sweep")
    space = inp.space
    parts = []
    for pinp, (base, g) in search_spaces(inp, world):      # as search prices them: each part under its stack
        X = structure(base, space.spec, space.gpus_per_node, inp.order)
        values = memory_grid(g, memory_tables(base, X, pinp), pinp, base)
        values.update(evaluate_grid(g, base, price_base(base, X, pinp, Pricer(model), bucket_caps_bytes(space)), pinp))
        rows = {c: base[c][g.bi] for c in ("W", "t", "p", "v", "c", "e", "d", "b", "uneven", "etp")}
        rows.update({c: getattr(g, c) for c in ("sp", "rc", "zero", "cap")})
        rows["tpo"] = np.broadcast_to(tp_overlap_column(g, base, pinp), (len(g.bi),))
        parts.append((rows, values))
    keys_v = [k for k in parts[0][1] if all(k in v for _, v in parts)]
    rows = {k: np.concatenate([np.asarray(r[k]) for r, _ in parts]) for k in parts[0][0]}
    values = {k: np.concatenate([np.broadcast_to(np.asarray(v[k]), (len(r["t"]),)) for r, v in parts]) for k in keys_v}
    return rows, values
