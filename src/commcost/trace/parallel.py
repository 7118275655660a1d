"""Each rank's trace as an independent task: serially, on local processes, or on a Dask cluster.

A job's traces are one file per rank, and every per-rank figure (:mod:`commcost.trace.analysis`,
:mod:`commcost.trace.collectives`) needs that rank's file only. :func:`analyze_file` is the task:
it reads one file (streamed, :func:`commcost.trace.load.load_rank`), measures it and returns a
:class:`RankResult` -- a few numbers per step, per collective call and per exposed-communication
interval, never the events -- so a worker holds one rank's trace at a time and the results that
travel back are small. :func:`run_ranks` runs the tasks

* serially in this process (``workers=1``, the default);
* on ``workers`` local processes (:mod:`commcost.trace.pool`: they die with this process, however it
  dies; at most one per CPU and per file, :func:`commcost.trace.pool.worker_count`);
* on a Dask distributed cluster (``scheduler="tcp://host:8786"``; ``dask[distributed]`` is an
  optional extra, imported here only): the same task function runs on a laptop's ``LocalCluster``
  and on a cluster's scheduler. Its workers must see the trace files at the same paths (a shared
  file system) and have commcost installed.

Whatever runs them, the results are put back in file order before anything is combined, so the
combined report is the same object as the serial one. A task that fails returns a
:class:`RankFailure` (its file and the one-line reason) instead of raising, so the other ranks
finish; the caller names the failed ones. No child process outlives :func:`run_ranks`: the pool is
shut down (pending tasks cancelled) on every way out, Ctrl-C included.
"""

from __future__ import annotations

import logging
import os
import resource
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from commcost.core.errors import InputError
from commcost.trace.analysis import RankSummary, analyze_rank, counted_activities, split_by_kind
from commcost.trace.collectives import TimedCall, timed_calls
from commcost.trace.intervals import measure, subtract, union
from commcost.trace.load import load_rank
from commcost.trace.pool import run_on_processes, worker_count
from commcost.trace.scheduler import HANDSHAKE_TIMEOUT_S, check_scheduler

__all__ = ["RankResult", "RankFailure", "analyze_file", "run_ranks", "DASK_HINT", "SHORT_GAP_S"]

DASK_HINT = "--scheduler needs dask[distributed]: pip install 'commcost[dask]'"
"""The one line printed when Dask is asked for and not installed."""

SHORT_GAP_S = 100e-6
"""Idle gaps between device events shorter than this (100 us) are counted as launch gaps (the
GPU waits for the CPU to launch the next kernel, a few to tens of microseconds each); longer ones
as host stalls (data loading, CPU-side work, a synchronisation)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankResult:
    """What one rank's task returns (small: no events)."""

    index: int
    """The file's position in the directory listing (the default rank)."""
    summary: RankSummary
    """Totals and per-step breakdown (:func:`commcost.trace.analysis.analyze_rank`)."""
    timed: tuple[TimedCall, ...]
    """Every timed collective call, sized or not (rows and cross-rank matching use these)."""
    untimed: int
    """Recorded calls without a kernel (or an op) to time them by."""
    backend: str | None
    """distributedInfo.backend."""
    world_size: int | None
    """distributedInfo.world_size."""
    origin_us: int
    """The rank's time origin, whole microseconds of its own clock (its times are seconds after it)."""
    exposed: tuple[tuple[float, float], ...]
    """``U(M) \\ U(K)`` of the counted events: exposed communication intervals, seconds on the rank's clock."""
    exposed_by_op_s: dict[str, float]
    """``|U(M_op) \\ U(K)|`` per collective over the counted events, seconds."""
    launch_gaps_s: float
    """Idle time in gaps shorter than :data:`SHORT_GAP_S` between the counted events' busy intervals, seconds."""
    host_gaps_s: float
    """Idle time in the longer gaps, seconds (``launch_gaps_s + host_gaps_s`` is the rank's idle)."""
    worker_pid: int
    """The process that ran the task (not part of any report)."""
    worker_peak_rss_bytes: int
    """That process's peak resident memory when the task ended, bytes (``ru_maxrss``; not part of any report)."""
    worker_cpu_s: float
    """That process's CPU time (user + system) when the task ended, seconds (not part of any report)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RankFailure:
    """A task that failed: its file and why, in one line."""

    index: int
    """The file's position in the listing."""
    path: str
    """The file."""
    message: str
    """One line."""
    bad_input: bool
    """True when the file is at fault (malformed, truncated: exit 2), False for a failure while running (exit 1)."""


def _extras(counted) -> tuple[list, dict[str, float], float, float]:
    comp, comm, every, by_op = split_by_kind(counted)
    u_comp = union(comp)
    exposed = subtract(union(comm), u_comp)
    by_op_s = {k: measure(subtract(union(v), u_comp)) for k, v in sorted(by_op.items())}
    busy = union(every)
    short = long = 0.0
    for (_, e0), (s1, _) in zip(busy, busy[1:]):
        gap = s1 - e0
        if gap < SHORT_GAP_S:
            short += gap
        else:
            long += gap
    return exposed, by_op_s, short, long


def analyze_file(path: str, index: int, round_us: bool = False) -> RankResult | RankFailure:
    """The task: read and measure one rank's file; a failure comes back as a :class:`RankFailure`."""
    try:
        rt = load_rank(path, default_rank=index, round_us=round_us)
        kernel_ops: dict = {}
        timed, untimed = timed_calls(rt, kernel_ops=kernel_ops)
        counted = counted_activities(rt, kernel_ops)
        summary = analyze_rank(rt, counted=counted)
        exposed, by_op_s, short, long = _extras(counted[1])
        use = resource.getrusage(resource.RUSAGE_SELF)
        rss = use.ru_maxrss * (1 if sys.platform == "darwin" else 1024)
        return RankResult(index=index, summary=summary, timed=tuple(timed), untimed=untimed,
                          backend=rt.backend, world_size=rt.world_size, origin_us=round(rt.origin_s * 1e6),
                          exposed=tuple(exposed), exposed_by_op_s=by_op_s, launch_gaps_s=short, host_gaps_s=long,
                          worker_pid=os.getpid(), worker_peak_rss_bytes=rss,
                          worker_cpu_s=use.ru_utime + use.ru_stime)
    except InputError as exc:
        return RankFailure(index=index, path=path, message=" ".join(str(exc).split()), bad_input=True)
    except (MemoryError, RecursionError, OSError) as exc:
        return RankFailure(index=index, path=path, message=f"{path}: {type(exc).__name__}: {exc}", bad_input=False)
    except Exception as exc:  # noqa: BLE001 - a bug on one rank must not stop the others; named, not raised
        return RankFailure(index=index, path=path, message=f"{path}: internal error: {type(exc).__name__}: {exc}",
                           bad_input=False)


Progress = Callable[[int, int, str], None]
"""``progress(done, total, path)``, called as each task ends."""


def run_ranks(files: list[str], *, round_us: bool = False, workers: int = 1, scheduler: str | None = None,
              progress: Progress | None = None) -> list[RankResult | RankFailure]:
    """Run :func:`analyze_file` on every file; the results in file order (module docstring)."""
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise TypeError(f"workers must be an int, got {type(workers).__name__}")
    if workers < 1:
        raise InputError(f"--workers {workers}: need at least 1")
    if scheduler is not None and not isinstance(scheduler, str):
        raise TypeError(f"scheduler must be an address string, got {type(scheduler).__name__}")
    workers = worker_count(workers, len(files))[0]
    if scheduler is not None:
        out = _on_dask(files, round_us, scheduler, progress)
    elif workers == 1:
        out = []
        for i, f in enumerate(files):
            out.append(analyze_file(f, i, round_us))
            if progress:
                progress(i + 1, len(files), f)
    else:
        out = _on_processes(files, round_us, workers, progress)
    return sorted(out, key=lambda r: r.index)


def _on_processes(files, round_us, workers, progress) -> list:
    """The tasks on local worker processes that die with this one (:mod:`commcost.trace.pool`)."""
    out: list = []

    def done(result, task) -> None:
        out.append(result)
        if progress:
            progress(len(out), len(files), task[0])

    def lost(task, why) -> None:
        done(RankFailure(index=task[1], path=task[0], bad_input=False, message=f"{task[0]}: {why}"), task)

    run_on_processes(analyze_file, [(f, i, round_us) for i, f in enumerate(files)], workers,
                     on_result=done, on_lost=lost)
    return out


def _on_dask(files, round_us, scheduler, progress) -> list:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise InputError(DASK_HINT) from None
    address = check_scheduler(scheduler)
    quiet = _quiet_dask_logs()
    try:
        return _run_on_client(Client, as_completed, files, round_us, address, scheduler, progress)
    finally:
        for logger, level in quiet:
            logger.setLevel(level)


def _quiet_dask_logs() -> list:
    """Dask's own loggers silenced (a lost scheduler logs tracebacks on stderr); their levels, to restore."""
    names = ["distributed"] + [n for n in logging.root.manager.loggerDict if n.startswith("distributed.")]
    out = []
    for name in names:
        logger = logging.getLogger(name)
        out.append((logger, logger.level))
        logger.setLevel(logging.CRITICAL + 1)
    return out


def _run_on_client(Client, as_completed, files, round_us, address, scheduler, progress) -> list:
    try:
        client = Client(address, timeout=f"{HANDSHAKE_TIMEOUT_S:g}s")
    except Exception as exc:  # noqa: BLE001 - whatever the address did, it is the address's fault: one line
        raise InputError(f"--scheduler {scheduler}: cannot connect ({type(exc).__name__}: "
                         f"{' '.join(str(exc).split())[:200]})") from None
    out = []
    try:
        run_id = uuid.uuid4().hex  # keys unique to this run: a cluster keeps finished keys' results
        futures = [client.submit(analyze_file, f, i, round_us, pure=False, key=f"commcost-trace-{run_id}-{i}")
                   for i, f in enumerate(files)]
        where = {fut.key: f for fut, f in zip(futures, files)}
        for done, fut in enumerate(as_completed(futures), 1):
            try:
                out.append(fut.result())
            except Exception as exc:  # noqa: BLE001 - a worker lost, a task killed: that rank fails, not the run
                i = files.index(where[fut.key])
                out.append(RankFailure(index=i, path=where[fut.key], bad_input=False,
                                       message=f"{where[fut.key]}: on the cluster: {type(exc).__name__}: {exc}"))
            if progress:
                progress(done, len(files), where[fut.key])
    finally:
        client.close()
    return out
