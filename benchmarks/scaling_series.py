"""Scaling series: does the plan's error trend with the GPU count?

A series is the published dense runs of one model at one global batch and sequence on one GPU, precision and
stack, at two or more GPU counts (the same job on more GPUs: strong scaling). Within a series the error should
not move with the GPU count; a step priced too fast by a growing margin is a loss that grows with the job and is
missing (:mod:`commcost.step.losses`). For each series: the signed error at each GPU count and the least-squares
slope of the error on ``log2(GPUs)`` (points of error per doubling); then the pooled within-series slope
``sum_s sum_i (x_i - x_s)(y_i - y_s) / sum_s sum_i (x_i - x_s)^2`` (``x = log2 GPUs``, ``y`` the signed error,
``x_s, y_s`` the series' means), every series weighted by its spread in GPUs.

``python benchmarks/plan_accuracy.py`` prints it on the leave-one-source-out errors; run alone it prints it on the
shipped constants: ``python benchmarks/scaling_series.py``; ``--breakdown`` adds each run's step as the plan
composes it (compute, bubble, exposed communication by dimension, optimizer, every loss of
:mod:`commcost.step.losses`) beside the measured step, and the seconds the plan leaves out (measured less
predicted): what a loss that grows with the job has to explain.
"""

from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

JAX = ("jax",)
"""Runs on a framework commcost has no stack for: left out (plan_accuracy.NO_STACK)."""


def series_key(row: dict, gpu: str) -> tuple:
    """What stays fixed within a series: model, global batch, sequence, GPU, precision, stack."""
    return (row["model"], row["global_batch"], row["seq"], gpu, row["precision"], row["stack"])


def series(results: list[dict], err: str = "err_signed") -> dict[tuple, list[tuple[int, float, str]]]:
    """``{key: [(GPUs, signed error, id), ...]}`` of the series with two GPU counts or more, from benchmark rows
    ``{row, inp, <err>}`` (dense, on PyTorch stacks)."""
    out: dict[tuple, list] = {}
    for r in results:
        if r["inp"].spec.is_moe or r["row"]["stack"] in JAX or err not in r:
            continue
        out.setdefault(series_key(r["row"], r["inp"].gpu), []).append((int(r["row"]["gpus"]), r[err], r["row"]["id"]))
    return {k: sorted(v) for k, v in out.items() if len({g for g, _, _ in v}) >= 2}


def slope_per_doubling(points) -> float:
    """Least-squares slope of the error on ``log2(GPUs)``: ``sum (x - x_s)(y - y_s) / sum (x - x_s)^2``."""
    return pooled_slope([points])


def pooled_slope(groups) -> float:
    """The within-series slope over every series (module docstring)."""
    num = den = 0.0
    for pts in groups:
        xs = [math.log2(g) for g, _, _ in pts]
        ys = [e for _, e, _ in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        num += sum((x - mx) * (y - my) for x, y in zip(xs, ys))
        den += sum((x - mx) ** 2 for x in xs)
    return num / den if den else 0.0


def report(results: list[dict], err: str = "err_signed", label: str = "") -> float:
    """Print every series and the pooled slope; return the pooled slope (a fraction per doubling)."""
    ser = series(results, err)
    print(f"SCALING SERIES ({len(ser)} series: same model, batch, sequence, GPU, precision and stack at more GPUs"
          + (f"; {label}" if label else "") + "):")
    for key, pts in sorted(ser.items(), key=lambda kv: kv[0][0]):
        cells = ", ".join(f"{g} {e:+.1%}" for g, e, _ in pts)
        print(f"  {key[0]:<20} {key[3]:<15} batch {key[1]:>5}: {cells}; "
              f"{slope_per_doubling(pts) * 100:+.1f} points per doubling")
    s = pooled_slope(ser.values())
    print(f"  pooled within-series slope: {s * 100:+.1f} points of signed error per doubling of the GPUs")
    print()
    return s


def shipped_results() -> list[dict]:
    """The series rows priced with the shipped constants: ``{row, inp, err_signed}``."""
    import csv

    import plan_accuracy as A
    from commcost.analyses.plan.plan import plan
    from commcost.hardware.registry import systems

    rows = list(csv.DictReader(A.DATA.open()))
    gpu = {r["id"]: systems()[r["system"]]["gpu"] for r in rows}
    keys: dict[tuple, set] = {}
    for r in rows:
        keys.setdefault(series_key(r, gpu[r["id"]]), set()).add(r["gpus"])
    out = []
    for r in rows:
        if len(keys[series_key(r, gpu[r["id"]])]) < 2 or r["stack"] in JAX:
            continue
        inp, model = A.inputs(r)
        measured = A.published_step_s(r)
        p = plan(inp, model)
        out.append(dict(row=r, inp=inp, err_signed=(p.step_s - measured) / measured, plan=p, measured_s=measured))
    return out


def breakdown(results: list[dict]) -> None:
    """Each series run's step as the plan composes it, beside the measured step (module docstring), seconds."""
    from commcost.step.losses import LOSS_NAMES

    short = {"straggler_s": "strag", "contention_s": "cont", "sync_s": "sync", "host_sync_s": "hsync"}
    print("BREAKDOWN (seconds; exp_<dim> the exposed communication; missing = measured - predicted):")
    for key, pts in sorted(series(results).items(), key=lambda kv: kv[0][0]):
        print(f"  {key[0]} on {key[3]}, batch {key[1]}, stack {key[5]}:")
        for g, _, rid in pts:
            r = next(x for x in results if x["row"]["id"] == rid)
            p, meas = r["plan"], r["measured_s"]
            ex = p.exposed_by_dimension()
            d = p.losses.to_dict()
            cells = [f"comp {p.compute_s:.4g}", f"bub {p.pipeline_bubble_s:.3g}"]
            cells += [f"exp_{k} {v:.3g}" for k, v in ex.items() if v > 0]
            cells += [f"{short[k]} {d[k]:.3g}" for k in LOSS_NAMES if d[k] > 0]
            print(f"    {g:>5} GPUs: measured {meas:.4g}, plan {p.step_s:.4g}, missing {meas - p.step_s:+.3g}")
            print("      " + ", ".join(cells))
    print()


if __name__ == "__main__":
    res = shipped_results()
    report(res, label="shipped constants")
    if "--breakdown" in sys.argv[1:]:
        breakdown(res)
