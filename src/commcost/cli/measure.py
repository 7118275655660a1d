"""``commcost measure``: time collectives with torch.distributed (spawned local ranks, or under torchrun)."""

from __future__ import annotations

import argparse
import sys

from commcost.cli import _args as A
from dataclasses import asdict
import signal
import threading
from commcost.calibrate.data import write_measurement
from commcost.calibrate.measure import MeasurementFailed
from commcost.calibrate.measure import measure
from commcost.cli.inputs_comm import measure_request
from commcost.core.strict_json import dump_json
from commcost.report.calibrate import render_measurement_text
from commcost.report.progress import SweepBar

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


def run(args: argparse.Namespace) -> int:
    """Parse (:func:`commcost.cli.inputs_comm.measure_request`), measure keeping rows on disk as they complete,
    render on rank 0."""
    _terminate_as_interrupt()
    req = measure_request(args)
    keep = req.output if req.is_rank0 else None  # the file rank 0 keeps the rows in
    kept = [0]
    A.on_interrupt(lambda: _kept_note(keep, kept[0]))

    def on_row(m) -> None:  # type: ignore[no-untyped-def]
        kept[0] = len(m.rows)
        if keep:
            write_measurement(m, keep)

    bar = SweepBar() if req.is_rank0 else (lambda done, total, label: None)
    try:
        m = measure(req.config, on_row=on_row, on_progress=bar)
    except MeasurementFailed as exc:
        where = f"; {kept[0]} completed row(s) kept in {req.output}" if req.output and kept[0] else ""
        print(f"{A.PROG}: error: measurement failed: {exc}{where}", file=sys.stderr)
        return 1
    if not req.is_rank0:
        return 0
    if req.output:
        write_measurement(m, req.output)
    if req.json:
        dump_json({"version": 1, "kind": "commcost-measurement", "provenance": m.provenance,
                   "rows": [asdict(r) for r in m.rows]})
    else:
        print(render_measurement_text(m), end="")
        if req.output:
            print(f"# written: {req.output}")
    return 0


def _kept_note(path: str | None, rows: int) -> str:
    """What an interrupted run leaves behind (``path``: the file rank 0 keeps rows in)."""
    if not path:
        return "nothing was written (no -o)"
    if rows:
        return f"{rows} completed row(s) kept in {path}"
    return f"no size had completed; {path} was not written"


def _terminate_as_interrupt() -> None:
    """SIGTERM raises :class:`commcost.cli._args.Terminated`, so the ranks are reaped, the rows kept
    and one line printed (exit 143), as for Ctrl-C; SIGKILL cannot be caught: the ranks then die by
    their parent-death signal (:func:`commcost.calibrate.measure_worker.die_with_parent`)."""

    def handler(signum, frame):  # type: ignore[no-untyped-def]
        raise A.Terminated()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)
