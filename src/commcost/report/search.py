"""Text, JSON, CSV and the Pareto plot for ``commcost search`` (the only code that formats a search)."""

from __future__ import annotations


from commcost.analyses.plan.training_cost import usd_per_million_tokens
from commcost.core.units import format_bytes, format_seconds
import csv
import io
from commcost.analyses.plan.space import RECOMPUTE
from commcost.analyses.plan.training_cost import training_cost
from commcost.core.optional import pyplot
from commcost.core.files import save_figure_atomic
from commcost.core.files import write_atomic
from commcost.core.strict_json import dumps_json
from commcost.report._width import terminal_width
from commcost.report._width import wrap_command
from commcost.report._width import wrap_lines
from commcost.report.plan import plan_to_dict
from commcost.analyses.interval import plan_interval
from commcost.report._interval import interval_cell
from commcost.report.training import render_training
from commcost.report.training import training_to_dict
from commcost.workload.stacks import KNOWN_STACKS
from commcost.workload.stacks import stacks_running
from commcost.parallel.layout import DEFAULT_ORDER

TYPE_CHECKING = False
if TYPE_CHECKING:
    from commcost.analyses.plan.plan import Plan
    from commcost.analyses.plan.search import SearchResult
    from commcost.analyses.plan.search_published import PublishedComparison

__all__ = ["search_to_dict", "render_search_json", "render_search_text", "why_best", "write_search_csv", "plan_command",
           "plot_pareto", "pareto_front", "layout_words", "why_not_fastest", "ranking_words", "published_to_dict",
           "published_words"]


def layout_words(p: Plan) -> str:
    """``tp 8 pp 4 vp 5 cp 1 dp 16 ep 1, ZeRO-1, SP, recompute selective, micro-batch 1, bucket 25 MiB``."""
    L, inp = p.inputs.layout, p.inputs
    bucket = "" if L.zero == 3 or L.grad_dp == 1 else \
        (", buckets DDP default" if inp.bucket_cap_bytes is None else f", buckets {inp.bucket_cap_bytes / 2**20:g} MiB")
    return (f"tp {L.tp} pp {L.pp} vp {L.vp} cp {L.cp} dp {L.dp}"
            + (f" ep {L.ep} etp {L.expert_tp}" if inp.spec.is_moe else "")
            + f", ZeRO-{L.zero}" + (", SP" if L.sequence_parallel else "") + f", recompute {L.recompute}"
            + f", micro-batch {L.micro_batch}" + bucket + ("" if L.world == 0 else f" ({L.world} GPUs)"))


def plan_flags(p: Plan) -> str:
    """The ``commcost plan`` flags that price this configuration."""
    L, inp = p.inputs.layout, p.inputs
    flags = [f"--gpus {L.world}", f"--tp {L.tp}", f"--pp {L.pp}", f"--vp {L.vp}", f"--cp {L.cp}"]
    if inp.spec.is_moe:
        flags.append(f"--ep {L.ep}")
        if L.etp:
            flags.append(f"--etp {L.expert_tp}")
        flags += ([f"--a2a {inp.a2a}"] if inp.a2a != "nccl" else []) + (["--fp8-dispatch"] if inp.fp8_dispatch else []) \
            + ([f"--moe-overlap {inp.moe_overlap}"] if inp.moe_overlap != "none" else []) \
            + ([f"--moe-imbalance {inp.expert_load:g}"] if inp.expert_load != 1 else [])
    flags += [f"--zero {L.zero}", f"--micro-batch {L.micro_batch}", f"--recompute {L.recompute}"]
    if L.sequence_parallel:
        flags.append("--sequence-parallel")
    if L.uneven_pipeline:
        flags.append("--uneven-pipeline")
    if L.split_counts_ends:
        flags.append("--split-counts-ends")
    if inp.bucket_cap_bytes is not None:
        flags.append(f"--bucket-mb {mib_exactly(inp.bucket_cap_bytes)}")
    if L.order != DEFAULT_ORDER:
        flags.append(f"--order {L.order}")
    if inp.tp_comm_overlap and L.tp > 1:        # the stack's recipes run it (search_passes), or it was asked
        flags.append("--tp-comm-overlap")
    return " ".join(flags)


def mib_exactly(cap_bytes: int) -> str:
    """``cap_bytes`` in MiB, short where that is exact, else to every digit: ``--bucket-mb X`` gives back
    ``int(X * 2**20) == cap_bytes`` (DDP's own conversion)."""
    short = f"{cap_bytes / 2**20:g}"
    return short if int(float(short) * 2**20) == cap_bytes else repr(cap_bytes / 2**20)


def plan_command(p: Plan, plan_prefix: tuple[str, ...] = ()) -> str:
    """The whole ``commcost plan`` command that reproduces ``p``: the search's model, sequence, batch,
    hardware and compute flags (``plan_prefix``, from the command line) and ``p``'s layout flags."""
    flags = plan_flags(p)
    if "--tp-comm-overlap" in plan_prefix:            # given on the command line: said once
        flags = flags.replace(" --tp-comm-overlap", "")
    return " ".join(("commcost plan", *plan_prefix, flags))


def _terms(p: Plan) -> dict[str, float]:
    """The step's additive terms: compute, bubble, exposed communication per dimension, optimizer."""
    out = {"compute": p.compute_s, "pipeline bubble": p.pipeline_bubble_s}
    for dim, s in sorted(p.exposed_by_dimension().items()):
        out[f"exposed {dim.upper()} communication"] = s
    out["optimizer"] = p.optimizer_s
    out["losses that grow with the job"] = p.losses.total_s
    return out


def why_best(best: Plan, runner: Plan) -> str:
    """In words, which term of the step makes the best faster than the runner-up (the step is the sum
    of its terms, so the term differences add up to the step difference)."""
    gap = runner.step_s - best.step_s
    a, b = _terms(best), _terms(runner)
    diffs = {k: b.get(k, 0.0) - a.get(k, 0.0) for k in {*a, *b}}
    if gap <= 1e-12 * max(best.step_s, 1e-30):
        return ("the best and the runner-up tie on the step (" + format_seconds(best.step_s) + "): they differ in "
                + _layout_diff(best, runner) + ", which the model prices the same")
    name, d = max(diffs.items(), key=lambda kv: kv[1])
    offset = sorted(((k, v) for k, v in diffs.items() if v < -0.05 * gap), key=lambda kv: kv[1])
    share = gap / runner.step_s
    pct = f"{share:.1%}" if share >= 1e-3 else f"{share * 100:.2g}%"
    text = (f"the best is {format_seconds(gap)} ({pct}) faster than the runner-up "
            f"({_layout_diff(best, runner)}): mostly its {name} ({format_seconds(a.get(name, 0.0))} against "
            f"{format_seconds(b.get(name, 0.0))})")
    if offset:
        text += "; it pays more " + ", ".join(f"{k} (+{format_seconds(-v)})" for k, v in offset[:2])
    return text


def _layout_diff(best: Plan, runner: Plan) -> str:
    La, Lb = best.inputs.layout, runner.inputs.layout
    parts = []
    for key in ("world", "tp", "pp", "vp", "cp", "ep", "dp", "zero", "micro_batch", "sequence_parallel", "recompute"):
        x, y = getattr(La, key), getattr(Lb, key)
        if x != y:
            parts.append(f"{key} {x} vs {y}")
    if best.inputs.bucket_cap_bytes != runner.inputs.bucket_cap_bytes:
        def cap(v):
            return "default" if v is None else f"{v / 2**20:g} MiB"
        parts.append(f"bucket {cap(best.inputs.bucket_cap_bytes)} vs {cap(runner.inputs.bucket_cap_bytes)}")
    return ", ".join(parts) or "no layout field"


def ranking_words(r: SearchResult) -> str:
    """How the results are ordered, in words."""
    h = f"{r.inputs.headroom:.0%}"
    lead = f"layouts that leave {h} of the card free at the upper end of their memory first"
    if r.robust_step_s is not None:
        return (f"ranked robust: {lead}, then by the step at the measured band's upper edge (every collective "
                "at its class's slowest measured cluster), among the best steps; ties by less memory")
    if r.pareto is not None:
        return f"ranked by the step: {lead}; ties by less memory (no measured band for this fabric)"
    if r.inputs.fragile_last:
        return f"ranked by {r.inputs.objective}: layouts that leave {h} of the card free first"
    return f"ranked by {r.inputs.objective} alone (layouts short of {h} memory headroom flagged, not moved)"


def why_not_fastest(r: SearchResult) -> str | None:
    """Why the first result is not the configuration of best objective (:attr:`SearchResult.fastest`),
    or None when it is: its memory leaves less than the headroom, or its band's upper edge is longer,
    or (without a band) the tie-break."""
    if not r.plans or r.fastest is None or r.fastest is r.plans[0]:
        return None
    best, fast = r.plans[0], r.fastest
    gap = best.step_s - fast.step_s
    text = (f"the fastest nominal layout ({layout_words(fast)}) has a step {format_seconds(max(gap, 0.0))} "
            f"shorter ({format_seconds(fast.step_s)}), but ")
    if r.fastest_fragile:
        cap = fast.memory.capacity_bytes
        return text + (f"its memory reaches {format_bytes(fast.memory.device_bytes[1])} of "
                       f"{format_bytes(cap)} at the upper end (allocator slack, context, NCCL): less than "
                       f"{r.inputs.headroom:.0%} of the card left free, where this one reaches "
                       f"{format_bytes(best.memory.device_bytes[1])}")
    if r.robust_step_s is not None and r.fastest_robust_step_s is not None:
        return text + (f"at the measured band's upper edge it takes {format_seconds(r.fastest_robust_step_s)} "
                       f"against this one's {format_seconds(r.robust_step_s[0])}: it hides more traffic only just")
    return text + "it ties on the ranked quantity and comes later in the enumeration"


def _gain(published: float, best: float) -> float:
    """``published / best - 1``: how much longer the published layout's step is than the best's."""
    return published / best - 1.0


def published_to_dict(r: SearchResult, c: PublishedComparison, plan_prefix: tuple[str, ...] = ()) -> dict:
    """The ``published`` JSON keys (docs/search.md)."""
    best = r.plans[0] if r.plans else None
    best_upper = None if r.robust_step_s is None else r.robust_step_s[0]
    return {"id": c.layout.id, "stack": c.layout.stack, "system": c.layout.system, "source": c.layout.source,
            "plan_command": plan_command(c.plan, plan_prefix), "step_s": c.plan.step_s,
            "robust_step_s": c.robust_step_s, "memory_total_bytes": c.plan.memory.total_bytes,
            "memory_high_bytes": c.plan.memory.device_bytes[1], "memory_fragile": c.fragile,
            "memory_fits": c.plan.memory.fits,
            "gap": None if best is None else _gain(c.plan.step_s, best.step_s),
            "gap_upper": None if best_upper is None or c.robust_step_s is None
            else _gain(c.robust_step_s, best_upper),
            "why": None if best is None or c.plan.step_s <= best.step_s else why_best(best, c.plan),
            "measured_step_s": c.layout.measured_step_s,
            "gap_measured": None if best is None or c.layout.measured_step_s is None
            else _gain(c.layout.measured_step_s, best.step_s)}


def published_words(r: SearchResult, c: PublishedComparison) -> list[str]:
    """The text lines comparing the best with the published layout."""
    p, best = c.plan, r.plans[0]
    upper = "" if c.robust_step_s is None else f" (upper edge {format_seconds(c.robust_step_s)})"
    lines = [f"published layout ({c.layout.id}, {c.layout.stack} on {c.layout.system}): {layout_words(p)}",
             f"  priced here: step {format_seconds(p.step_s)}{upper}, memory {format_bytes(p.memory.total_bytes)}"
             + (" (does not fit)" if not p.memory.fits else " (may not fit)" if p.memory.verdict == "may not fit"
               else " (fragile)" if c.fragile else "")]
    measured = c.layout.measured_step_s
    if measured is not None:   # the gain a user can count on is against the run's measurement, not its prediction
        g = _gain(measured, best.step_s)
        lines.append(f"  measured: step {format_seconds(measured)}, "
                     + (f"{g:.1%} longer" if g >= 0 else f"{-g:.1%} shorter")
                     + f" than the best's predicted {format_seconds(best.step_s)}")
    gap = _gain(p.step_s, best.step_s)
    if gap > 0:
        text = f"  its predicted step is {gap:.1%} longer than the best's"
        if c.robust_step_s is not None and r.robust_step_s is not None:
            text += f" ({_gain(c.robust_step_s, r.robust_step_s[0]):+.1%} at the upper edges)"
        lines.append(text + "; " + why_best(best, p).replace("the runner-up", "the published layout"))
    else:
        lines.append(f"  the published layout's step is {-gap:.1%} shorter than the best's: the ranking put "
                     "robustness (band's upper edge, memory headroom) first")
    if c.layout.stack != r.inputs.stack and c.layout.stack in KNOWN_STACKS[1:]:
        lines.append(f"  (priced with this search's stack and options; it ran on {c.layout.stack}: --stack "
                     f"{c.layout.stack} prices both as that stack runs them)")
    lines.append(f"  source: {c.layout.source}")
    return lines


def _training(inp, p: Plan):
    """The training run's cost at ``p``'s throughput (:mod:`commcost.analyses.plan.training_cost`); None without tokens."""
    if inp.train_tokens is None:
        return None

    return training_cost(tokens=inp.train_tokens, tokens_per_s_per_gpu=p.tokens_per_s_per_gpu,
                         gpus=p.inputs.layout.world, price_per_gpu_hour=inp.price_per_gpu_hour or None)


def search_to_dict(r: SearchResult, bands: tuple | None = None, *, plan_prefix: tuple[str, ...] = (),
                   published: PublishedComparison | None = None) -> dict:
    """The stable JSON keys (docs/search.md): ``results[]`` carry ``plan --json``'s keys (``bands``: the
    :class:`commcost.analyses.uncertainty.PlanBand` of each plan, on a system preset alone, as ``plan`` prints it)."""

    inp = r.inputs
    results = []
    for rank, p in enumerate(r.plans, 1):
        iv = plan_interval(p, None if bands is None else bands[rank - 1])   # the step's prediction interval
        d = plan_to_dict(p, None if bands is None else bands[rank - 1], iv)
        d["rank"] = rank
        d["plan_flags"] = plan_flags(p)
        d["plan_command"] = plan_command(p, plan_prefix)
        if r.robust_step_s is not None:
            d["robust_step_s"] = r.robust_step_s[rank - 1]
        d["memory_high_bytes"] = p.memory.device_bytes[1]
        d["stacks_that_run"] = list(stacks_running(p.inputs.layout))
        if r.fragile:
            d["memory_fragile"] = r.fragile[rank - 1]
        if r.pareto is not None:
            d["pareto"] = r.pareto[rank - 1]
        if inp.price_per_gpu_hour > 0:
            d["usd_per_million_tokens"] = usd_per_million_tokens(inp.price_per_gpu_hour, p.tokens_per_s_per_gpu)
        run_cost = _training(inp, p)
        if run_cost is not None:
            d["training"] = training_to_dict(run_cost, iv)
        results.append(d)
    out = {"model": inp.space.spec.name, "gpus": list(inp.space.gpus), "seq": inp.space.seq,
           "global_batch": inp.space.global_batch, "objective": inp.objective,
           "rank_by": "robust" if r.robust_step_s is not None else inp.objective, "ranking": ranking_words(r),
           "memory_headroom": inp.headroom, "stack": inp.stack, "defaults_note": inp.defaults_note,
           "evaluated": r.evaluated,
           "feasible": r.feasible, "infeasible": {"model_states_exceed_memory": r.over_by_states,
                                                  "activations_exceed_memory": r.over_by_activations},
           "priced": r.priced, "distinct_collectives": r.distinct_collectives, "elapsed_s": r.elapsed_s, "interrupted": r.interrupted,
           "fixed": {k: (RECOMPUTE[v] if k == "recompute" else v) for k, v in inp.space.fixed}, "results": results}
    if len(r.plans) >= 2:
        out["why_best"] = why_best(r.plans[0], r.plans[1])
    if r.fastest is not None:
        out["fastest"] = {"plan_command": plan_command(r.fastest, plan_prefix), "step_s": r.fastest.step_s,
                          "robust_step_s": r.fastest_robust_step_s, "memory_fragile": r.fastest_fragile,
                          "memory_high_bytes": r.fastest.memory.device_bytes[1],
                          "is_first": bool(r.plans) and r.fastest is r.plans[0]}
        out["why_not_fastest"] = why_not_fastest(r)
    out["published"] = None if published is None else published_to_dict(r, published, plan_prefix)
    return out


def search_to_dict_fixed(space) -> list[tuple[str, object]]:
    """``--fix`` pairs with recomputation by name."""

    return [(k, RECOMPUTE[v] if k == "recompute" else v) for k, v in space.fixed]


def render_search_json(r: SearchResult, bands: tuple | None = None, *, plan_prefix: tuple[str, ...] = (),
                       published: PublishedComparison | None = None) -> str:
    """Strict JSON (no NaN or infinity)."""

    return dumps_json(search_to_dict(r, bands, plan_prefix=plan_prefix, published=published)).rstrip("\n")


def _nothing_fits(r: SearchResult) -> str:
    """The line :func:`render_search_text` prints when no configuration that fits was priced, and why."""
    if r.interrupted:
        return "interrupted before any configuration that fits was priced"
    elif r.over_by_states == r.evaluated:
        return ("no configuration fits: the model states alone exceed the GPU in every layout; "
                "more GPUs (ZeRO-3 over more ranks, more tp x pp) are needed")
    else:
        return ("no configuration fits: more GPUs or a shorter sequence (every micro-batch size and "
                "recomputation was tried)")


_COLS = f"{'#':>3} {'step':>9} {'tok/s/GPU':>9} {'MFU':>6} {'compute':>9} {'bubble':>9} {'exp.comm':>9} " \
        f"{'optim.':>8} {'memory':>9}"
"""The header of the results table (kept whole when the report wraps)."""


def _table_lines(r: SearchResult, bands: tuple | None) -> tuple[list[str], list]:
    """The results table (each layout's breakdown and memory, then its words) and each result's prediction
    interval, as plan prints it."""
    inp = r.inputs
    table = ["", _COLS, "      layout" + ("; $/Mtok" if inp.price_per_gpu_hour else "")
             + ("; step at the band's upper edge" if r.robust_step_s is not None else "")]
    bands = bands if bands is not None else r.bands
    ivs = [plan_interval(p, None if bands is None else bands[i]) for i, p in enumerate(r.plans)]  # as plan prints
    for i, p in enumerate(r.plans, 1):
        table.append(f"{i:>3} {format_seconds(p.step_s):>9} {p.tokens_per_s_per_gpu:>9,.0f} {p.mfu:>6.1%} "
                     f"{format_seconds(p.compute_s):>9} {format_seconds(p.pipeline_bubble_s):>9} "
                     f"{format_seconds(p.exposed_comm_s):>9} {format_seconds(p.optimizer_s):>8} "
                     f"{format_bytes(p.memory.total_bytes):>9}")
        extra = [layout_words(p), interval_cell(ivs[i - 1])]
        if inp.price_per_gpu_hour:
            extra.append(f"${usd_per_million_tokens(inp.price_per_gpu_hour, p.tokens_per_s_per_gpu):.3f}/Mtok")
        if r.robust_step_s is not None:
            extra.append(f"upper edge {format_seconds(r.robust_step_s[i - 1])}")
        if r.fragile and r.fragile[i - 1]:
            extra.append(f"FRAGILE: memory within {inp.headroom:.0%} of the card")
        if r.pareto is not None and not r.pareto[i - 1]:
            extra.append("off the front (another is faster with less memory)")
        table.append("      " + "; ".join(extra))
    return table, ivs


def _best_lines(r: SearchResult, plan_prefix: tuple[str, ...], width: int) -> list[str]:
    """The best layout: its plan command, exposed communication by dimension, memory, the stacks that run it, and
    why it beats the runner-up and the fastest."""
    inp = r.inputs
    lines: list[str] = []
    best = r.plans[0]
    m = best.memory
    lines += ["", *wrap_command("best:", plan_command(best, plan_prefix), width),
              "  exposed communication by dimension: " + (", ".join(
                  f"{d} {format_seconds(s)}" for d, s in sorted(best.exposed_by_dimension().items())) or "none"),
              f"  memory per GPU: weights {format_bytes(m.weights_bytes)}, gradients {format_bytes(m.gradients_bytes)}, "
              f"optimizer {format_bytes(m.optimizer_bytes)}, activations {format_bytes(m.activations_bytes)}, buffers "
              f"{format_bytes(m.buffers_bytes)}: {format_bytes(m.total_bytes)} of {format_bytes(m.capacity_bytes)}"]
    runs = stacks_running(best.inputs.layout)
    lines.append("  stacks that run this layout (hardware/stacks.json): " + (", ".join(runs) or "none of them")
                 + ("" if inp.stack != "auto" else "; --stack NAME searches only one stack's layouts"))
    if len(r.plans) >= 2 and r.robust_step_s is not None and r.plans[1].step_s < best.step_s:
        lines.append(f"  why: the runner-up's step is {format_seconds(best.step_s - r.plans[1].step_s)} shorter, but at "
                     f"the band's upper edge it takes {format_seconds(r.robust_step_s[1])} against the best's "
                     f"{format_seconds(r.robust_step_s[0])}")
    elif len(r.plans) >= 2:
        lines.append("  why: " + why_best(best, r.plans[1]))
    not_fastest = why_not_fastest(r)
    if not_fastest:
        lines.append("  why not the fastest: " + not_fastest)
    return lines


def render_search_text(r: SearchResult, *, plan_prefix: tuple[str, ...] = (), stopped_by: str = "Ctrl-C",
                       published: PublishedComparison | None = None, bands: tuple | None = None) -> str:
    """The human report: counts, the top configurations with breakdown and memory, why the best wins
    (``stopped_by``: what interrupted an interrupted search, ``Ctrl-C`` or ``SIGTERM``)."""

    width = terminal_width()
    inp = r.inputs
    sp = inp.space
    gpus = f"{sp.gpus[0]}" if len(sp.gpus) == 1 else f"{sp.gpus[0]}-{sp.gpus[-1]} ({len(sp.gpus)} counts)"
    lines = [f"{sp.spec.name}: {sp.spec.params / 1e9:.1f}B parameters on {gpus} x {inp.gpu}, seq {sp.seq}, "
             f"global batch {sp.global_batch}, {inp.precision}; objective {inp.objective}"
             + (f"; fixed {', '.join(f'{k}={v}' for k, v in search_to_dict_fixed(sp))}" if sp.fixed else ""),
             f"{r.evaluated:,} configurations evaluated in {r.elapsed_s:.2f} s "
             f"({r.distinct_collectives:,} distinct collectives priced); {r.feasible:,} fit in memory, "
             f"{r.over_by_states + r.over_by_activations:,} do not ({r.over_by_states:,} because the model states "
             f"alone exceed the GPU, {r.over_by_activations:,} because activations and buffers push them over)"]
    if r.interrupted:
        what = "terminated" if stopped_by == "SIGTERM" else "interrupted"
        lines.append(f"{what} ({stopped_by}): the best of the {r.priced:,} configurations priced so far")
    if not r.plans:
        lines.append(_nothing_fits(r))
        return wrap_lines("\n".join(lines), width)
    lines.append(f"fabric: {r.plans[0].comm_model}")
    if inp.defaults_note:
        lines.append(f"assumed: {inp.defaults_note}")
    lines.append(ranking_words(r))
    table, ivs = _table_lines(r, bands)
    lines += table
    best = r.plans[0]
    lines += _best_lines(r, plan_prefix, width)
    if published is not None:
        lines += published_words(r, published)
    run_cost = _training(inp, best)
    if run_cost is not None:
        lines.append("  " + render_training(run_cost, ivs[0]))
    for w in best.warnings:
        lines.append(f"warning: {w}")
    return wrap_lines("\n".join(lines), width, keep=lambda line: line.endswith(" \\") or line == _COLS)


def write_search_csv(r: SearchResult, path: str, *, plan_prefix: tuple[str, ...] = ()) -> None:
    """One row per result, ``plan --json``'s scalar keys flattened (``layout.tp``, ``breakdown.compute_s`` ...)."""

    rows = []
    for d in search_to_dict(r, plan_prefix=plan_prefix)["results"]:
        flat: dict = {}
        for k, v in d.items():
            if isinstance(v, dict):
                for kk, vv in v.items():   # one level more: breakdown.losses.straggler_s ...
                    if isinstance(vv, dict):
                        flat.update({f"{k}.{kk}.{x}": y for x, y in vv.items() if not isinstance(y, (dict, list))})
                    else:
                        flat[f"{k}.{kk}"] = vv
            elif not isinstance(v, list):
                flat[k] = v
            elif k == "step_interval_s":   # the prediction interval's edges, a column each
                flat["step_interval_low_s"], flat["step_interval_high_s"] = v
        rows.append(flat)


    buf = io.StringIO(newline="")
    if rows:
        # every row's keys, in first-seen order: a nested value may be absent (None) in one row and a
        # dict in another (``bucket_advice`` only where buckets run)
        w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for row in rows for k in row)), restval="")
        w.writeheader()
        w.writerows(rows)
    write_atomic(path, buf.getvalue())


def pareto_front(x, y):
    """Indices of the points no other point beats on both ``x`` and ``y`` (smaller is better), by ``x``."""
    import numpy as np

    order = np.lexsort((y, x))
    best = np.minimum.accumulate(y[order])
    keep = np.ones(len(order), dtype=bool)
    keep[1:] = y[order][1:] < best[:-1]
    return order[keep]


def plot_pareto(r: SearchResult, path: str) -> None:
    """Step time against memory per GPU (and against GPU count when several were searched): every
    configuration that fits as a faint cloud, the Pareto front as a line, the best as a star."""

    import numpy as np

    plt = pyplot()
    pts = r.points or {}
    step, mem, W = (np.asarray(pts.get(k, [])) for k in ("step_s", "memory_high_bytes", "gpus"))
    panels = 2 if len(r.inputs.space.gpus) > 1 else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.5 * panels, 4.5), squeeze=False)
    ax = axes[0][0]
    if len(step):
        take = np.linspace(0, len(step) - 1, min(len(step), 20000)).astype(int)
        ax.scatter(mem[take] / 1e9, step[take], s=2, alpha=0.15, color="0.5", label="fits (sample)")
        front = pareto_front(mem, step)
        ax.plot(mem[front] / 1e9, step[front], "-o", ms=3, color="C0", label="Pareto front (nominal step)")
    if r.robust_step_s is not None:     # the ranked quantity: the front of the band's upper edge
        up, mb = np.asarray(r.robust_step_s), np.asarray([p.memory.device_bytes[1] for p in r.plans])
        front = pareto_front(mb, up)
        ax.plot(mb[front] / 1e9, up[front], "-s", ms=3, color="C1", label="front at the band's upper edge (ranked)")
        ax.plot([mb[0] / 1e9], [up[0]], "*", ms=14, color="C3", label="best (ranked at its upper edge)")
        ax.plot([mb[0] / 1e9], [r.plans[0].step_s], "o", ms=7, mfc="none", color="C3", label="best, nominal step")
    elif r.plans:
        ax.plot([r.plans[0].memory.device_bytes[1] / 1e9], [r.plans[0].step_s], "*", ms=14, color="C3", label="best")
    if r.plans:
        ax.axvline(r.plans[0].memory.capacity_bytes / 1e9, ls="--", color="0.3", lw=0.8, label="GPU memory")
    ax.set_xlabel("memory per GPU, upper estimate on the card (GB = 1e9 bytes)")
    ax.set_yscale("log")
    ax.set_ylabel("step time (s, log scale)")
    ax.set_title(f"{r.inputs.space.spec.name}: step against memory")
    ax.legend(fontsize=8)
    if panels == 2:
        ax2 = axes[0][1]
        if len(step):
            counts = np.unique(W)
            best = [step[W == w].min() for w in counts]
            ax2.plot(counts, best, "-o", color="C0", label="best step per GPU count")
            tokens = r.inputs.space.global_batch * r.inputs.space.seq
            ax2b = ax2.twinx()
            ax2b.plot(counts, [tokens / (b * w) for b, w in zip(best, counts)], "--s", color="C1",
                      label="tokens/s/GPU")
            ax2b.set_ylabel("tokens/s/GPU at that step")
            ax2b.legend(fontsize=8, loc="lower left")
        ax2.set_xscale("log", base=2)
        ax2.set_xlabel("GPUs")
        ax2.set_ylabel("step time (s)")
        ax2.set_title("best step against GPU count")
        ax2.legend(fontsize=8, loc="upper right")
    fig.tight_layout()

    save_figure_atomic(fig, path, dpi=120)
