"""Charts for ``commcost timeline --plot``: the two streams as a Gantt chart, and the bucket curve.

matplotlib is imported lazily through :func:`commcost.report._optional.pyplot`.
"""

from __future__ import annotations

from commcost.step.sweep import BucketSweep
from commcost.step.timeline import Timeline
from commcost.units import MS, MiB

__all__ = ["plot_timeline"]


def _gantt(ax, tl: Timeline, title: str) -> None:
    compute_y, comm_y, h = 10, 0, 8
    # compute stream: everything before the last backward, the last backward, the optimizer
    ax.broken_barh([(0.0, tl.backward_start_s / MS)], (compute_y, h),
                   facecolors="#c7d7ea", label="forward (and any earlier no_sync micro-batches)")
    ax.broken_barh([(tl.backward_start_s / MS, tl.backward_window_s / MS)], (compute_y, h),
                   facecolors="#4c72b0", label="backward (last micro-batch)")
    end_comm = max((b.end_s for b in tl.buckets), default=tl.compute_s)
    opt_start = max(tl.compute_s, end_comm)
    if tl.optimizer_s > 0:
        ax.broken_barh([(opt_start / MS, tl.optimizer_s / MS)], (compute_y, h),
                       facecolors="#8172b2", label="optimizer")
    # communication stream: alternate two colours so adjacent buckets stay visible
    even = [(b.start_s / MS, (b.end_s - b.start_s) / MS) for b in tl.buckets[0::2]]
    odd = [(b.start_s / MS, (b.end_s - b.start_s) / MS) for b in tl.buckets[1::2]]
    ax.broken_barh(even, (comm_y, h), facecolors="#dd8452", label="bucket all-reduce")
    if odd:
        ax.broken_barh(odd, (comm_y, h), facecolors="#c44e52")
    if tl.exposed_s > 0:
        ax.axvspan(tl.compute_s / MS, (tl.compute_s + tl.exposed_s) / MS, color="#c44e52", alpha=0.12,
                   label=f"exposed {tl.exposed_s / MS:.1f} ms")
    ax.axvline(tl.compute_s / MS, color="black", lw=0.8, ls="--")
    ax.set_yticks([comm_y + h / 2, compute_y + h / 2], ["comm", "compute"])
    ax.set_xlabel("time from step start (ms)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", fontsize=7, ncol=2)
    ax.set_ylim(-2, compute_y + h + 14)


def plot_timeline(path: str, tl: Timeline, sweep: BucketSweep | None = None,
                  default: Timeline | None = None) -> None:
    """Write the Gantt chart of ``tl`` (and, with ``sweep``, the step-vs-bucket curve) to ``path``."""
    from commcost.report._optional import pyplot
    plt = pyplot()
    rows = 2 if sweep is not None else 1
    fig, axes = plt.subplots(rows, 1, figsize=(10, 3.6 * rows), squeeze=False)
    title = (f"{len(tl.buckets):,} buckets of {tl.bucket_cap_bytes / MiB:.3g} MiB "
             f"(first {tl.first_bucket_cap_bytes / MiB:.3g} MiB): step {tl.step_s / MS:.1f} ms, "
             f"exposed {tl.exposed_s / MS:.1f} ms of {tl.wire_s / MS:.1f} ms on the wire")
    _gantt(axes[0][0], tl, title)
    if sweep is not None:
        ax = axes[1][0]
        x = [p.bucket_bytes / MiB for p in sweep.curve]
        ax.plot(x, [p.step_s / MS for p in sweep.curve], marker=".", label="step")
        ax.plot(x, [p.exposed_s / MS for p in sweep.curve], ls="--", label="exposed")
        ax.plot(x, [p.wire_s / MS for p in sweep.curve], ls=":", label="on the wire")
        ax.axvline(sweep.best.bucket_cap_bytes / MiB, color="green", lw=0.8,
                   label=f"best {sweep.best.bucket_cap_bytes / MiB:.3g} MiB")
        if default is not None:
            ax.scatter([default.bucket_cap_bytes / MiB], [default.step_s / MS], color="black", zorder=3,
                       label="PyTorch default (25 MiB, first 1 MiB)")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("bucket cap (MiB)")
        ax.set_ylabel("time (ms)")
        ax.set_title("step time against bucket size: latency side (left), tail side (right)", fontsize=10)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
