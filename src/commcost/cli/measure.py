"""``commcost measure``: time collectives with torch.distributed (spawned local ranks, or under torchrun)."""

from __future__ import annotations

import argparse
import sys
import time

from commcost.cli import _args as A
from dataclasses import asdict
import os
import signal
import threading
from commcost.calibrate.data import write_measurement
from commcost.calibrate.measure import MeasureConfig
from commcost.calibrate.measure import MeasurementFailed
from commcost.calibrate.measure import launched_by_torchrun
from commcost.calibrate.measure import measure
from commcost.calibrate.measure import size_grid
from commcost.calibrate.measure import size_quantum_bytes
from commcost.comm.collectives import Collective
from commcost.core.errors import InputError
from commcost.core.optional import require
from commcost.core.units import format_bytes
from commcost.report._json import dump_json
from commcost.report.calibrate import render_measurement_text

__all__ = ["HELP", "add_arguments", "run"]

HELP = "measure collectives with torch.distributed (gloo/NCCL; local ranks or torchrun) and save CSV/JSON"

EXAMPLES = (
    '--backend gloo --nproc 2 --ops all_reduce,all_gather --sizes 1KiB:64MiB -o gloo.csv',
    '--backend nccl -o cluster.csv   (under torchrun: one rank of the job)',
)
"""Command lines shown at the end of ``--help``."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of ``commcost measure``."""
    p.add_argument("--backend", choices=("auto", "gloo", "nccl"), default="auto",
                   help="torch.distributed backend (default: nccl when CUDA is available, else gloo)")
    p.add_argument("--nproc", type=A.positive_int, default=2,
                   help="local ranks to spawn (default 2; ignored under torchrun)")
    p.add_argument("--ops", type=A.collective_list, default=None,
                   help="collectives, comma-separated, or all (default all_reduce,all_gather,reduce_scatter)")
    p.add_argument("--sizes", type=A.size_bounds, default=(1024.0, 64 * 2.0**20),
                   help="size range MIN:MAX, e.g. 1KiB:64MiB (default), on a geometric grid")
    p.add_argument("--factor", type=A.positive_float, default=2.0, help="grid ratio between sizes (default 2)")
    p.add_argument("--dtype", choices=("float32", "float16", "bfloat16", "float64"), default="float32",
                   help="element type (default float32, as nccl-tests)")
    p.add_argument("--warmup", type=A.nonneg_int, default=5, help="untimed calls per size (default 5)")
    p.add_argument("--iters", type=A.positive_int, default=20, help="timed calls per size (default 20)")
    p.add_argument("--stat", choices=("median", "min", "mean"), default="median",
                   help="each rank's summary of its timed calls (default median; the slowest rank is kept)")
    p.add_argument("--timeout", type=A.positive_float, default=300.0,
                   help="seconds without progress before the run is ended (default 300)")
    p.add_argument("-o", "--output", help="write rows here as they complete (.json: JSON, else CSV)")
    p.add_argument("--json", action="store_true", help="print the measurement as one JSON object")


class _Bar:
    """A progress bar on stderr, shown once the sweep has run a couple of seconds."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.shown = -1
        self.tty = sys.stderr.isatty()

    def __call__(self, done: int, total: int, label: str) -> None:
        if time.monotonic() - self.start < 2.0 and done < total:
            return
        width = 30
        filled = int(width * done / max(total, 1))
        text = f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}"
        if self.tty:
            print(f"\r{text:<80}", end="" if done < total else "\n", file=sys.stderr, flush=True)
        elif 10 * done // max(total, 1) != self.shown:  # not a terminal: at most ~11 lines
            print(text, file=sys.stderr, flush=True)
        self.shown = 10 * done // max(total, 1)


def run(args: argparse.Namespace) -> int:
    """Measure, keeping rows on disk as they complete; render on rank 0."""


    _terminate_as_interrupt()
    if args.output:
        A.check_output_path("-o", args.output)
    ops = args.ops or (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER)
    lo, hi = args.sizes
    ranks = args.nproc
    if launched_by_torchrun():
        try:
            ranks = int(os.environ["WORLD_SIZE"])
        except ValueError:
            A.fail(f"WORLD_SIZE={os.environ['WORLD_SIZE'][:40]!r} is not an integer (set by torchrun)")
    try:  # the grid is checked before torch is imported: a bad range is refused at once
        sizes = size_grid(lo, hi, args.factor, quantum_bytes=size_quantum_bytes(tuple(ops), args.dtype, ranks))
    except InputError as exc:
        A.fail(f"--sizes {_shown_range(lo, hi)} --factor {args.factor:.10g}: {exc}")
    torch = require("torch", "measure")
    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    elif backend == "nccl" and not torch.cuda.is_available():
        A.fail("--backend nccl needs CUDA devices, and torch sees none (torch.cuda.is_available() is False); "
               "use --backend gloo to measure on CPUs")
    cfg = MeasureConfig(backend=backend, ops=tuple(ops), sizes_bytes=sizes,
                        dtype=args.dtype, warmup=args.warmup, iters=args.iters, statistic=args.stat,
                        timeout_s=args.timeout, nproc=args.nproc)
    is_rank0 = not launched_by_torchrun() or os.environ.get("RANK") == "0"
    kept = [0]

    def kept_note() -> str:
        if not (args.output and is_rank0):
            return "nothing was written (no -o)"
        if kept[0]:
            return f"{kept[0]} completed row(s) kept in {args.output}"
        return f"no size had completed; {args.output} was not written"
    A.on_interrupt(kept_note)

    def on_row(m) -> None:  # type: ignore[no-untyped-def]
        kept[0] = len(m.rows)
        if args.output and is_rank0:
            write_measurement(m, args.output)

    bar = _Bar() if is_rank0 else (lambda done, total, label: None)
    try:
        m = measure(cfg, on_row=on_row, on_progress=bar)
    except MeasurementFailed as exc:
        where = f"; {kept[0]} completed row(s) kept in {args.output}" if args.output and kept[0] else ""
        print(f"{A.PROG}: error: measurement failed: {exc}{where}", file=sys.stderr)
        return 1
    if not is_rank0:
        return 0
    if args.output:
        write_measurement(m, args.output)
    if args.json:

        dump_json({"version": 1, "kind": "commcost-measurement", "provenance": m.provenance,
                   "rows": [asdict(r) for r in m.rows]})
    else:
        print(render_measurement_text(m), end="")
        if args.output:
            print(f"# written: {args.output}")
    return 0


def _shown_range(lo: float, hi: float) -> str:

    return f"{format_bytes(lo, binary=True)}:{format_bytes(hi, binary=True)}".replace(" ", "")


def _terminate_as_interrupt() -> None:
    """SIGTERM raises :class:`commcost.cli._args.Terminated`, so the ranks are reaped, the rows kept
    and one line printed (exit 143), as for Ctrl-C; SIGKILL cannot be caught: the ranks then die by
    their parent-death signal (:func:`commcost.calibrate.measure_worker.die_with_parent`)."""

    def handler(signum, frame):  # type: ignore[no-untyped-def]
        raise A.Terminated()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)
