"""The parts of the budget report: the bucket and scaling tables (full and narrow), the simulated timeline's lines,
verdict and JSON, and the small cell formatters they share. :mod:`commcost.report.budget` assembles the report from them
(moved from there unchanged).
"""

from __future__ import annotations

from commcost.step.buckets import BucketRow
from commcost.analyses.drill.budget import Budget
from commcost.report.bucket_advice import render_bucket_advice
from commcost.core.units import MB, MiB, format_fraction as pct, format_mb_mib, format_seconds as t


__all__: list[str] = []   # the report's private parts


def _mib(n_bytes: float) -> str:
    return f"{n_bytes / MiB:,.4g} MiB"


def _ran(c) -> str:
    """``in_network (simple protocol)``: the algorithm that ran, and NCCL's protocol where modelled."""
    return c.algorithm.value + (f" ({c.protocol} protocol)" if c.protocol else "")


def _table(full: list[str], narrow, width: int | None, tables: set[str]) -> list[str]:
    """``full`` (header and rows), or ``narrow()`` where ``width`` is set and a full row is wider; the
    chosen rows are added to ``tables`` (never wrapped)."""
    rows = full if width is None or max(map(len, full)) <= width else narrow()
    tables.update(rows)
    return rows


def _band_cell(point_s: float, edges: tuple[float, float]) -> str:
    """``184.47 us - 581.24 us``, and which side of the point where the range does not contain it."""
    from commcost.report._band import band_range, band_side

    return band_range(*edges) + band_side(point_s, *edges, brief=True)


def _mib_cap(tl) -> str:
    return f"{tl.bucket_cap_bytes / MiB:,.4g} MiB"


def _buckets_text(b: Budget, width: int | None = None, tables: set[str] | None = None) -> str:
    i, bt = b.inputs, b.buckets
    adv = bt.advice
    flat = i.comm.flat_link is not None
    out = [f"(f) buckets  crossover S* = P*a*B = {bt.crossover_bytes:,.0f} B = {format_mb_mib(bt.crossover_bytes)}"
           if flat else f"(f) buckets  crossover S* (one bucket's latency term = its bandwidth term) = "
                        f"{bt.crossover_bytes:,.0f} B = {format_mb_mib(bt.crossover_bytes)}",
           "    total = count * 2(P-1)a + 2(P-1)/P * S/B" if flat else
           "    total = (count-1) T(cap) + T(last bucket), each all-reduce from the fabric's model"]
    full = [f"    {'cap':>9} {'count':>7} {'1 bucket: latency':>18} {'bandwidth':>11} {'lat share':>10} "
            f"{'latency total':>14} {'total':>12} {'T/step':>7}" + _exposed_header(b)]
    for r in bt.rows:
        full.append(f"    {_mib(r.cap_bytes):>9} {r.count:>7,} {t(r.one_bucket.latency_s):>18} "
                    f"{t(r.one_bucket.bandwidth_s):>11} {pct(r.latency_share):>10} "
                    f"{t(r.latency_total_s):>14} {t(r.total_s):>12} "
                    f"{pct(r.total_s / b.step.compute_s):>7}" + _exposed_cell(b, r))
    out += _table(full, lambda: _buckets_drill(b) if flat else _buckets_narrow(b), width,
                  set() if tables is None else tables)
    if b.overlap is not None:
        out.append("    exposed: simulated all-reduce time left after backward ends, each cap as an explicit "
                   f"bucket_cap_mb (torch 2.13: first bucket = cap), {_stream_words(b)}")
    if i.gpus == 1:
        out.append("    P = 1: no all-reduce, bucket size does not matter.")
        return "\n".join(out)
    s = adv.max_latency_share
    lat = "2(P-1)a =" if flat else "a latency term of"
    out.append(f"    smallest bucket: latency share <= {pct(s)} needs c >= {'S*(1-s)/s' if flat else 'about S*(1-s)/s'} = "
               f"{format_mb_mib(adv.min_bucket_bytes)}; smaller buckets pay {lat} "
               f"{t(b.allreduce.latency_s)} each for too few bytes")
    out.append(f"    largest bucket: the last bucket cannot overlap; keeping its all-reduce within "
               f"{t(adv.tail_budget_s)} ({pct(i.tail_budget_fraction)} of the step) needs c <= "
               f"{format_mb_mib(adv.max_bucket_bytes)}; larger buckets also leave too few buckets to overlap")
    if not adv.consistent:
        out.append("    no cap meets both ends: the latency term alone is too large for this tail budget")
    d = adv.pytorch_default
    verdict = "within" if adv.min_bucket_bytes <= d.cap_bytes <= adv.max_bucket_bytes else "outside"
    ov = b.overlap
    packed = "" if ov is None or len(ov.default.buckets) == d.count else \
        f" (DDP packs {len(ov.default.buckets):,}, simulated in (c): {_packing_words(b)})"
    recommended = ov is not None and ov.advice.recommended_bytes == d.cap_bytes
    out.append(f"    PyTorch's 25 MiB default: ceil(S/c) = {d.count:,} buckets{packed}, latency share "
               f"{pct(d.latency_share)} each, total {t(d.total_s)} ({pct(d.total_s / b.step.compute_s)} of the step, "
               f"backward window {t(b.step.backward_window_s)}); {verdict} the sensible range of latency share and "
               "tail here" + ("; simulated, it is still the cap recommended below" if recommended and
                              verdict == "outside" else ""))
    if ov is not None:
        out.append("    " + render_bucket_advice(ov.advice))
    if ov is not None and verdict == "outside" and ov.default.exposed_s <= adv.tail_budget_s:
        out.append(f"    but simulated, the default leaves only {t(ov.default.exposed_s)} exposed (within the "
                   f"{t(adv.tail_budget_s)} tail budget; the best cap {t(ov.best.exposed_s)}): the wire time "
                   "hides in the backward window, so here the bucket size barely changes the step; the range "
                   "above is about each bucket's latency share")
    return "\n".join(out)


def _packing_words(b: Budget) -> str:
    """How DDP's own buckets differ from ``ceil(S/c)`` equal ones."""
    if b.overlap is not None and b.overlap.advice.stream == "per-tensor":
        return "tensors whole, a tensor larger than the cap alone in its bucket"
    return "its first bucket is 1 MiB"


def _buckets_drill(b: Budget) -> list[str]:
    """(f)'s table on the drill's flat link in about 80 columns, every column of the full one kept (the drill
    prints the same numbers at any width): cap, count, one bucket's latency and bandwidth terms, its latency
    share, the latency total, the total, T/step, exposed."""
    exposed = f" {'exposed':>9}" if b.overlap is not None else ""
    out = [f"  {'cap':>7} {'count':>6} {'latency':>8} {'bandwidth':>9} {'lat%':>5} {'lat total':>9} {'total':>9} "
           f"{'T/step':>6}" + exposed]
    for k, r in enumerate(b.buckets.rows):
        cell = ""
        if b.overlap is not None:
            e = b.overlap.exposed_by_cap_s[k]
            cell = f" {t(e) if e is not None else 'n/a':>9}"
        out.append(f"  {_mib(r.cap_bytes):>7} {r.count:>6,} {t(r.one_bucket.latency_s):>8} "
                   f"{t(r.one_bucket.bandwidth_s):>9} {pct(r.latency_share):>5} {t(r.latency_total_s):>9} "
                   f"{t(r.total_s):>9} {pct(r.total_s / b.step.compute_s):>6}" + cell)
    return out


def _buckets_narrow(b: Budget) -> list[str]:
    """(f)'s table in about 76 columns: one bucket's latency and bandwidth terms, its latency share,
    the total, T/step, exposed; the latency total is left to ``--json`` (``buckets.rows[].latency_total_s``)."""
    exposed = f" {'exposed':>9}" if b.overlap is not None else ""
    out = [f"    {'cap':>9} {'count':>7} {'latency':>9} {'bandwidth':>9} {'lat %':>6} {'total':>9} "
           f"{'T/step':>7}" + exposed]
    for r in b.buckets.rows:
        cell = ""
        if b.overlap is not None:
            e = b.overlap.exposed_by_cap_s[b.buckets.rows.index(r)]
            cell = f" {t(e) if e is not None else 'n/a':>9}"
        out.append(f"    {_mib(r.cap_bytes):>9} {r.count:>7,} {t(r.one_bucket.latency_s):>9} "
                   f"{t(r.one_bucket.bandwidth_s):>9} {pct(r.latency_share):>6} {t(r.total_s):>9} "
                   f"{pct(r.total_s / b.step.compute_s):>7}" + cell)
    return out


def _scaling_text(b: Budget, width: int | None = None, tables: set[str] | None = None) -> str:
    flat = b.inputs.comm.flat_link is not None
    out = ["(g) scaling on the same fabric (per-GPU batch fixed)"]
    full = [f"    {'P':>6} {'latency 2(P-1)a' if flat else 'latency':>16} {'bandwidth':>11} {'total T':>10} "
            f"{'T/step':>8} {'S* = P*a*B' if flat else 'S*':>12} {'global batch':>13}"]
    for r in b.scaling:
        mark = "  <- this run" if r.gpus == b.inputs.gpus else ""
        full.append(f"    {r.gpus:>6} {t(r.allreduce.latency_s):>16} {t(r.allreduce.bandwidth_s):>11} "
                    f"{t(r.allreduce.total_s):>10} {pct(r.comm_fraction):>8} "
                    f"{r.crossover_bytes / MB:>9,.1f} MB {r.global_batch_growth:>12g}x{mark}")
    if width is not None and flat and max(map(len, full)) > width:
        out.append("    latency 2(P-1)a, S* = P*a*B")      # the full table's headers, which carry the formulas
    out += _table(full, lambda: _scaling_narrow(b), width, set() if tables is None else tables)
    if b.bandwidth_limit_s is not None:
        out.append(f"    bandwidth term -> 2S/B = {t(b.bandwidth_limit_s)} as P grows (it saturates); "
                   "latency term grows linearly in P; S* grows with P, so fixed buckets drift "
                   "into the latency-bound regime; the global batch grows with P and may pass the "
                   "critical batch size long before communication stops the run")
    else:
        out.append("    each row is the model's all-reduce at P (a fabric with the nodes P needs), so the bandwidth "
                   "term steps up where the group leaves "
                   "the NVLink domain instead of tending to 2S/B of the one-link drill; the latency term "
                   "still grows with P; the global batch grows with P and may pass the critical batch size "
                   "long before communication stops the run")
    return "\n".join(out)


def _scaling_narrow(b: Budget) -> list[str]:
    """(g)'s table in at most 80 columns (the same columns, narrower; ``batch`` is the global batch)."""
    out = [f"    {'P':>6} {'latency':>9} {'bandwidth':>10} {'total T':>9} {'T/step':>7} {'S*':>9} {'batch':>6}"]
    for r in b.scaling:
        mark = "  <- this run" if r.gpus == b.inputs.gpus else ""
        out.append(f"    {r.gpus:>6} {t(r.allreduce.latency_s):>9} {t(r.allreduce.bandwidth_s):>10} "
                   f"{t(r.allreduce.total_s):>9} {pct(r.comm_fraction):>7} "
                   f"{r.crossover_bytes / MB:>6,.1f} MB {r.global_batch_growth:>5g}x{mark}")
    return out


# --- The simulated overlap: exposed time from the DDP bucket timeline -----

def _exposed_header(b: Budget) -> str:
    return f" {'exposed':>10}" if b.overlap is not None else ""


def _exposed_cell(b: Budget, row: BucketRow) -> str:
    if b.overlap is None:
        return ""
    exposed = b.overlap.exposed_by_cap_s[b.buckets.rows.index(row)]
    return f" {t(exposed) if exposed is not None else 'n/a':>10}"


def _share_of_T(b: Budget, exposed_s: float) -> str:
    T = b.allreduce.total_s
    return f"{pct(exposed_s / T)} of T" if T > 0 else "no communication"


def _stream_words(b: Budget) -> str:
    """How the gradients arrive in the simulation: a uniform rate, or the model's tensors."""
    if b.inputs.shape is None:
        return "gradients at a uniform rate"
    return "gradients per tensor, layer by layer in reverse (the model's shape; DDP never splits a tensor)"


def _simulated_lines(b: Budget) -> list[str]:
    ov = b.overlap
    if ov is None or b.allreduce.total_s == 0:
        return []
    d, best = ov.default, ov.best
    return [
        f"    simulated (DDP bucket timeline, {_stream_words(b)}, one comm stream; `commcost timeline`):",
        f"      PyTorch's 25 MiB default (first bucket 1 MiB): {len(d.buckets):,} buckets, {t(d.wire_s)} on the "
        f"wire, exposed {t(d.exposed_s)} = {_share_of_T(b, d.exposed_s)} -> efficiency {pct(d.efficiency)}",
        f"      best bucket {best.bucket_cap_bytes / MiB:,.3g} MiB (the largest cap exposing within max(5%, 50 us) "
        f"of the least, and no more than the default): {len(best.buckets):,} buckets, "
        f"{t(best.wire_s)} on the wire, exposed {t(best.exposed_s)} = {_share_of_T(b, best.exposed_s)} "
        f"-> efficiency {pct(best.efficiency)}",
    ]


def _simulated_verdict(b: Budget) -> str:
    ov = b.overlap
    assert ov is not None
    d, best = ov.default, ov.best
    return (f"-> Simulated: with the 25 MiB default {t(d.exposed_s)} ({_share_of_T(b, d.exposed_s)}) stays exposed, "
            f"{pct(d.exposed_s / d.step_s)} of its {t(d.step_s)} step; with {best.bucket_cap_bytes / MiB:,.3g} MiB "
            f"buckets {t(best.exposed_s)} ({_share_of_T(b, best.exposed_s)}), {pct(best.exposed_s / best.step_s)} "
            f"of its {t(best.step_s)} step. What costs time is the exposed part, not T/step.")


def _simulated_dict(b: Budget) -> dict[str, object]:
    ov = b.overlap
    if ov is None:
        return {}
    return {
        "default_bucket_bytes": ov.default.bucket_cap_bytes,
        "default_first_bucket_bytes": ov.default.first_bucket_cap_bytes,
        "default_wire_s": ov.default.wire_s, "default_exposed_s": ov.default.exposed_s,
        "default_step_s": ov.default.step_s,
        "best_bucket_bytes": ov.best.bucket_cap_bytes, "best_wire_s": ov.best.wire_s,
        "best_exposed_s": ov.best.exposed_s, "best_step_s": ov.best.step_s,
        "good_min_bucket_bytes": ov.choice.good_min_cap_bytes, "good_max_bucket_bytes": ov.choice.good_max_cap_bytes,
        "good_bucket_bytes": list(ov.choice.good_caps_bytes),
        "tolerance_s": ov.choice.tolerance_s, "rule": ov.choice.rule,
    }
