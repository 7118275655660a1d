"""Measure collectives with torch.distributed (gloo on CPU, NCCL on GPUs).

Two launch modes, one worker:

* spawned: ``commcost measure --nproc N`` starts N local ranks (``spawn``
  context, TCP rendezvous on a free local port) and watches them;
* torchrun: when ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` are set, this
  process is one rank (``env://`` rendezvous), so ``torchrun --nnodes 4
  --nproc-per-node 8 -m commcost measure`` works unchanged across nodes.

Timing (as nccl-tests does): for each collective and size, ``warmup`` untimed
calls, a barrier, then ``iters`` timed calls (each timed alone: wall clock on
CPU, CUDA events on GPU); a rank's time is the median of those calls (not the
mean nccl-tests prints: on a shared CPU one preempted call would move the mean
by milliseconds; ``statistic`` can ask for ``min`` or ``mean``), and the row
keeps the slowest rank's value (an all-reduce MAX), since a collective ends when
its last rank does. Sizes follow nccl-tests: the whole buffer for all-reduce, broadcast
and reduce, the whole output for all-gather, the whole input for reduce-scatter
and all-to-all (rounded down to a multiple of ranks x element size).

Failure: each rank reports ``begin``/``end`` of every size to the launcher. A
rank that exits, or no progress for ``timeout_s``, ends the run with
:class:`MeasurementFailed` naming the rank, the collective and the size; all
ranks are then terminated (and killed if they do not stop), so no process is
left behind. Rows are handed to ``on_row`` as they complete, so the caller can
keep them on disk. Tests inject faults with ``COMMCOST_MEASURE_FAULT=die@RANK:SIZE``
or ``hang@RANK:SIZE``.
"""

from __future__ import annotations

import datetime as _dt
import os
import queue as _queue
import socket
import time
from typing import Any, Callable

from commcost.calibrate.data import Measurement, MeasurementRow
from commcost.calibrate.measure_config import DTYPES, MeasureConfig
from commcost.calibrate.measure_worker import rank_main, spawned_worker
from commcost.comm.collectives import Collective
from commcost.core.errors import InputError
from commcost.core.units import format_bytes
from commcost.core.validation import require_finite_positive
from multiprocessing.connection import wait
import math
import signal
import threading
from commcost.calibrate.measure_worker import RankChannel
from commcost.core.optional import require
import commcost

__all__ = ["MeasureConfig", "MeasurementFailed", "size_grid", "size_quantum_bytes", "MAX_GRID_SIZES", "launched_by_torchrun", "measure", "DTYPES"]

STARTUP_S = 120.0
"""Seconds start-up may take before the launcher gives up, whatever ``timeout_s`` says."""


class MeasurementFailed(RuntimeError):
    """A rank died or hung; the message names it, the collective and the size."""


MAX_GRID_SIZES = 200
"""Most sizes one sweep may measure (nccl-tests' 8 B to 8 GiB doubling is 31): a factor of
1.0000001 would otherwise schedule millions of sizes before any rank starts."""
MAX_MEASURE_BYTES = 2**36
"""Largest message a rank is asked to allocate, 64 GiB."""


def size_grid(min_bytes: float, max_bytes: float, factor: float = 2.0, *, quantum_bytes: int = 1) -> tuple[int, ...]:
    """Geometric sizes ``min, min*factor, ...`` up to ``max`` (inclusive), bytes, each rounded down
    to a multiple of ``quantum_bytes`` (what the ranks can actually move: one element, or one per
    rank for all-gather and reduce-scatter), without repeats.

    The number of sizes is known before any is made, ``n = floor(ln(max/min) / ln(factor)) + 1``,
    and refused above :data:`MAX_GRID_SIZES`; so is a range whose sizes all round to one, or one
    that starts below one quantum."""
    for name, value in (("min_bytes", min_bytes), ("max_bytes", max_bytes), ("factor", factor)):
        require_finite_positive(name, value)
    if max_bytes > MAX_MEASURE_BYTES:
        raise InputError(f"sizes up to {format_bytes(MAX_MEASURE_BYTES, binary=True)} can be measured, "
                         f"got {max_bytes:.4g} bytes")
    if not 0 < min_bytes <= max_bytes:
        raise InputError(f"size range must satisfy 0 < min <= max, got {min_bytes:.4g}:{max_bytes:.4g}")
    if not factor > 1:
        raise InputError(f"size factor must be > 1, got {factor:g}")
    if max_bytes > MAX_MEASURE_BYTES:
        raise InputError(f"sizes up to {format_bytes(MAX_MEASURE_BYTES, binary=True)} can be measured, "
                         f"got {format_bytes(max_bytes, binary=True)}")
    if min_bytes < quantum_bytes:
        raise InputError(f"the smallest size {min_bytes:.0f} B is below what one call moves, {quantum_bytes} B "
                         "(one element per rank for all-gather/reduce-scatter/all-to-all, else one element)")

    n = math.floor(math.log(max_bytes / min_bytes) / math.log(factor) * (1 + 1e-12)) + 1
    if n > MAX_GRID_SIZES:
        least = (max_bytes / min_bytes) ** (1 / (MAX_GRID_SIZES - 1))
        raise InputError(f"{format_bytes(min_bytes, binary=True)} to {format_bytes(max_bytes, binary=True)} "
                         f"with factor {factor:g} is {n:,} sizes; at most {MAX_GRID_SIZES} are measured in one "
                         f"run (use a factor of at least {least:.4g})")
    out = []
    for i in range(n):
        s = min_bytes * factor**i
        out.append(max(quantum_bytes, int(round(s)) // quantum_bytes * quantum_bytes))
    distinct = tuple(dict.fromkeys(out))
    if len(distinct) < len(out):
        raise InputError(f"{format_bytes(min_bytes, binary=True)} to {format_bytes(max_bytes, binary=True)} with "
                         f"factor {factor:g} gives {len(out)} sizes but only {len(distinct)} distinct ones in "
                         f"multiples of {quantum_bytes} B (what one call moves); use a larger factor")
    return distinct


def size_quantum_bytes(ops: tuple[Collective, ...], dtype: str, ranks: int) -> int:
    """The bytes one call can move in steps of: an element, times the ranks when an op splits its
    buffer among them (all-gather, reduce-scatter, all-to-all), as :func:`measure_worker._buffers` does."""
    per_rank = any(op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL) for op in ops)
    return DTYPES[dtype] * (ranks if per_rank else 1)


def launched_by_torchrun() -> bool:
    """True when RANK, WORLD_SIZE and LOCAL_RANK are all set (torchrun, or any launcher that sets them)."""
    return all(k in os.environ for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK"))


# ----------------------------------------------------------------------------- launcher side

def _provenance(cfg: MeasureConfig, world: int, launcher: str, hello: tuple | None) -> dict[str, Any]:
    import torch


    hosts = list(hello[2]) if hello else []
    return {
        "backend": cfg.backend, "world_size": world, "nodes": len(set(hosts)) or None,
        "hosts": sorted(set(hosts)), "device": hello[3] if hello else None,
        "library_version": hello[4] if hello else None, "torch_version": torch.__version__,
        "commcost_version": commcost.__version__, "launcher": launcher, "dtype": cfg.dtype, "statistic": cfg.statistic,
        "warmup": cfg.warmup, "iters": cfg.iters,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_STEPS = {"begin": 0, "call": 1, "error": 1, "end": 2}


def _where(state: tuple[str, str, int] | None) -> str:
    if state is None or state[0] == "init" or state[1] == "init":
        return "during start-up (before the first size)"
    what = f"{state[1]} at {format_bytes(state[2], binary=True)} ({state[2]} B)"
    return {"begin": f"preparing {what}", "end": f"after finishing {what}"}.get(state[0], f"in {what}")


def _measure_spawned(cfg: MeasureConfig, on_row: Callable[[Measurement], None],
                     on_progress: Callable[[int, int, str], None]) -> Measurement:
    import torch.multiprocessing as mp


    world = cfg.nproc
    ctx = mp.get_context("spawn")
    pipes = [ctx.Pipe(duplex=False) for _ in range(world)]   # (reader, writer) per rank: no semaphore
    events = _Events([reader for reader, _ in pipes])
    init_method = f"tcp://127.0.0.1:{_free_port()}"
    procs = [ctx.Process(target=spawned_worker, args=(r, world, cfg, init_method, RankChannel(pipes[r][1]),
                                                      os.getpid()),
                         daemon=True) for r in range(world)]
    state: dict[int, tuple[str, str, int] | None] = {r: None for r in range(world)}
    errors: dict[int, str] = {}
    done: set[int] = set()
    rows: list[MeasurementRow] = []
    hello: tuple | None = None
    total = len(cfg.ops) * len(cfg.sizes_bytes)
    last_progress = time.monotonic()
    try:
        _start_ignoring_sigint(procs)
        for _, writer in pipes:
            writer.close()  # the ranks hold their ends: a rank's pipe reads EOF once it is gone

        def apply(ev: tuple) -> None:
            nonlocal hello
            kind, rank = ev[0], ev[1]
            if kind == "hello":
                hello = ev
            elif kind in ("begin", "call", "end"):
                state[rank] = (kind, ev[2], ev[3])
            elif kind == "row":
                rows.append(ev[2])
                on_row(Measurement(rows=tuple(rows), provenance=_provenance(cfg, world, "spawn", hello)))
                on_progress(len(rows), total, f"{ev[2].op} {format_bytes(ev[2].size_bytes, binary=True)}")
            elif kind == "error":
                errors[rank] = ev[4]
                state[rank] = ("error", ev[2], ev[3])
            elif kind == "done":
                done.add(rank)

        def drain() -> None:
            """Take the events still in flight (the other ranks' last steps) before naming a failure."""
            quiet_until, stop = time.monotonic() + 0.3, time.monotonic() + 2.0
            while time.monotonic() < min(quiet_until, stop):
                try:
                    apply(events.get(timeout=0.05))
                    quiet_until = time.monotonic() + 0.3
                except _queue.Empty:
                    pass

        while len(done) < world:
            try:
                ev = events.get(timeout=0.1)
            except _queue.Empty:
                ev = None
            now = time.monotonic()
            if ev is not None:
                last_progress = now
                apply(ev)
                continue
            dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in errors]
            if dead:
                drain()
                r = dead[0]
                raise MeasurementFailed(f"rank {r} died (exit code {procs[r].exitcode}), last reported "
                                        f"{_where(state[r])}" + _others(state, r, cfg))
            if errors:
                drain()
                r = min(errors)
                raise MeasurementFailed(f"rank {r} failed {_where(state[r])}: {errors[r]}")
            exited = [r for r, p in enumerate(procs) if p.exitcode == 0 and r not in done]
            if exited and now - last_progress > 5.0:
                raise MeasurementFailed(f"rank {exited[0]} exited early {_where(state[exited[0]])}")
            # Start-up (spawning, importing torch, rendezvous) gets at least STARTUP_S before it counts as hung.
            limit = cfg.timeout_s if hello is not None else max(cfg.timeout_s, STARTUP_S)
            if now - last_progress > limit:
                raise MeasurementFailed(_hang_message(state, cfg) if hello is not None else
                                        f"no rank finished start-up within {limit:g} s (spawn, import torch, "
                                        "rendezvous)")
        for p in procs:
            p.join(timeout=10)
        return Measurement(rows=tuple(rows), provenance=_provenance(cfg, world, "spawn", hello))
    finally:
        _reap(procs)
        events.close()
        events.cancel_join_thread()


class _Events:
    """The ranks' pipes read as one queue: ``get(timeout)`` returns the next event of any rank, or
    raises ``queue.Empty``; a pipe at EOF (its rank exited) is dropped."""

    def __init__(self, readers: list[Any]) -> None:
        self.readers = list(readers)

    def get(self, timeout: float) -> Any:

        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not self.readers:
                if self.readers == [] and left > 0:
                    time.sleep(left)
                raise _queue.Empty
            for reader in wait(self.readers, left):
                try:
                    return reader.recv()
                except (EOFError, OSError):
                    self.readers.remove(reader)
                    reader.close()

    def close(self) -> None:
        for reader in self.readers:
            reader.close()
        self.readers = []

    def cancel_join_thread(self) -> None:
        """Nothing to cancel (a pipe has no feeder thread)."""


def _start_ignoring_sigint(procs: list[Any]) -> None:
    """Start the ranks with SIGINT ignored (inherited through exec), so a Ctrl-C at the terminal,
    which reaches the whole process group, stops the launcher alone; it then ends the ranks."""

    if threading.current_thread() is not threading.main_thread():
        for p in procs:
            p.start()
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for p in procs:
            p.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def _progress_key(s: tuple[str, str, int] | None, cfg: MeasureConfig) -> tuple[int, int, int]:
    """Order of a rank's last event in the sweep (later is larger)."""
    ops = [o.value for o in cfg.ops]
    if s is None or s[0] not in _STEPS:
        return (-1, -1, -1)
    return (ops.index(s[1]), cfg.sizes_bytes.index(s[2]) if s[2] in cfg.sizes_bytes else -1, _STEPS[s[0]])


def _others(state: dict[int, tuple[str, str, int] | None], r: int, cfg: MeasureConfig) -> str:
    """Where the other ranks are, when they are further than rank ``r`` got to report."""
    rest = {x: s for x, s in state.items() if x != r}
    if not rest:
        return ""
    lead = max(rest.values(), key=lambda s: _progress_key(s, cfg))
    if _progress_key(lead, cfg) <= _progress_key(state[r], cfg):
        return ""
    who = ", ".join(str(x) for x, s in rest.items() if s == lead)
    return f"; rank(s) {who} were {_where(lead)}"


def _hang_message(state: dict[int, tuple[str, str, int] | None], cfg: MeasureConfig) -> str:
    """Name the rank(s) that fell behind the others; if none did, name the call every rank is stuck in."""
    def key(s: tuple[str, str, int] | None) -> tuple[int, int, int]:
        return _progress_key(s, cfg)

    lead = max(key(s) for s in state.values())
    behind = [r for r, s in state.items() if key(s) < lead]
    ahead = next(s for s in state.values() if key(s) == lead)
    if behind:
        r = behind[0]
        others = ", ".join(str(x) for x in state if x not in behind)
        return (f"rank {r} hung: no progress for {cfg.timeout_s:g} s, last seen {_where(state[r])}, "
                f"while rank(s) {others} wait {_where(ahead)}")
    return f"no progress for {cfg.timeout_s:g} s: every rank is stuck {_where(ahead)}"


def _reap(procs: list[Any]) -> None:
    """Terminate, then kill, every rank still alive, and wait for each."""
    procs = [p for p in procs if p.pid is not None]  # started ones only
    for p in procs:
        if p.is_alive():
            p.terminate()
    deadline = time.monotonic() + 5.0
    for p in procs:
        p.join(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join(timeout=5.0)


def _measure_torchrun(cfg: MeasureConfig, on_row: Callable[[Measurement], None],
                      on_progress: Callable[[int, int, str], None]) -> Measurement:
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    if world < 2:
        raise InputError(f"WORLD_SIZE is {world}; a collective needs at least 2 ranks")
    rows: list[MeasurementRow] = []
    hello: list[tuple] = []
    state: list[tuple[str, str, int]] = []
    total = len(cfg.ops) * len(cfg.sizes_bytes)

    def emit(ev: tuple) -> None:
        if ev[0] == "hello":
            hello.append(ev)
        elif ev[0] in ("begin", "call", "end"):
            state[:] = [(ev[0], ev[2], ev[3])]
        elif ev[0] == "row":
            rows.append(ev[2])
            on_row(Measurement(rows=tuple(rows), provenance=_provenance(cfg, world, "torchrun",
                                                                         hello[0] if hello else None)))
            on_progress(len(rows), total, f"{ev[2].op} {format_bytes(ev[2].size_bytes, binary=True)}")
        elif ev[0] == "error":
            raise MeasurementFailed(f"rank {rank} failed {_where(state[0] if state else None)}: {ev[4]}")

    try:
        rank_main(rank, world, local_rank, cfg, "env://", emit)
    except MeasurementFailed:
        raise
    except Exception as exc:  # noqa: BLE001 - rank_main reported it through emit already
        raise MeasurementFailed(f"rank {rank} failed {_where(state[0] if state else None)}: {exc}") from None
    return Measurement(rows=tuple(rows), provenance=_provenance(cfg, world, "torchrun",
                                                                hello[0] if hello else None))


def measure(cfg: MeasureConfig, *, on_row: Callable[[Measurement], None] = lambda m: None,
            on_progress: Callable[[int, int, str], None] = lambda done, total, what: None) -> Measurement:
    """Run the sweep (spawned ranks, or this process as one torchrun rank).

    ``on_row`` receives the measurement so far after every completed size (on
    rank 0 only under torchrun), ``on_progress`` ``(done, total, label)``.
    Raises :class:`MeasurementFailed` when a rank dies or hangs.
    """

    require("torch", "measure")
    if launched_by_torchrun():
        return _measure_torchrun(cfg, on_row, on_progress)
    return _measure_spawned(cfg, on_row, on_progress)
