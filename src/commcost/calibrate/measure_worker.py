"""The rank side of ``commcost measure``: one rank's sweep, reporting every step to its launcher.

Each rank sends ``("begin" | "call" | "end", rank, op, size)`` around every size,
``("row", 0, MeasurementRow)`` from rank 0 once the slowest rank's time is known,
``("error", rank, op, size, message)`` when it fails and ``("done", rank)`` at
the end; :mod:`commcost.calibrate.measure` turns those into rows on disk, a
progress bar, and a message naming a dead or hung rank. torch is imported inside
the functions (it is an optional extra).
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
import time
from typing import TYPE_CHECKING, Any, Callable

from commcost.calibrate.data import MeasurementRow
from commcost.comm.collectives import Collective, bus_bandwidth_factor

if TYPE_CHECKING:
    from commcost.calibrate.measure_config import MeasureConfig

__all__ = ["DTYPES", "FAULT_ENV", "rank_main", "spawned_worker", "die_with_parent"]

from commcost.calibrate.measure_config import DTYPES  # noqa: E402 (the one table of element sizes)
FAULT_ENV = "COMMCOST_MEASURE_FAULT"
"""Test hook: ``die@RANK:SIZE`` (the rank exits at once) or ``hang@RANK:SIZE`` (it sleeps an hour)."""


def _fault(rank: int, size: int) -> None:
    spec = os.environ.get(FAULT_ENV, "")
    if not spec:
        return
    kind, _, where = spec.partition("@")
    r, _, s = where.partition(":")
    if int(r) == rank and int(s) == size:
        if kind == "die":
            os._exit(3)
        if kind == "hang":
            time.sleep(3600)


def _buffers(torch: Any, op: Collective, size: int, world: int, dtype: Any, elem: int, device: Any):
    """(bytes actually moved, callable running the collective once)."""
    import torch.distributed as dist

    per_rank_multiple = op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL)
    n = max(1, size // elem)
    if per_rank_multiple:
        n = max(world, n // world * world)
    big = torch.ones(n, dtype=dtype, device=device)
    if op is Collective.ALL_REDUCE:
        return n * elem, lambda: dist.all_reduce(big)
    if op is Collective.BROADCAST:
        return n * elem, lambda: dist.broadcast(big, 0)
    if op is Collective.REDUCE:
        return n * elem, lambda: dist.reduce(big, 0)
    if op is Collective.ALL_GATHER:
        small = torch.ones(n // world, dtype=dtype, device=device)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor  # renamed in torch 2.1x
        return n * elem, lambda: gather(big, small)
    if op is Collective.REDUCE_SCATTER:
        small = torch.empty(n // world, dtype=dtype, device=device)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return n * elem, lambda: scatter(small, big)
    if op is Collective.ALL_TO_ALL:
        out = torch.empty_like(big)
        return n * elem, lambda: dist.all_to_all_single(out, big)
    # send/recv: every rank sends to the next and receives from the previous (a ring shift)
    recv = torch.empty_like(big)
    rank = dist.get_rank()

    def shift() -> None:
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, big, (rank + 1) % world),
                                       dist.P2POp(dist.irecv, recv, (rank - 1) % world)])
        for req in reqs:
            req.wait()
    return n * elem, shift


def _time_one(torch: Any, run: Callable[[], None], cfg: MeasureConfig,
              device: Any) -> tuple[float, float, float]:
    """(typical, min, max) seconds of one call on this rank, after warm-up and a barrier."""
    import torch.distributed as dist

    cuda = device.type == "cuda"
    for _ in range(cfg.warmup):
        run()
    if cuda:
        torch.cuda.synchronize(device)
    dist.barrier()
    times: list[float] = []
    if cuda:
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(cfg.iters)]
        for start, end in events:
            start.record()
            run()
            end.record()
        torch.cuda.synchronize(device)
        times = [start.elapsed_time(end) * 1e-3 for start, end in events]
    else:
        for _ in range(cfg.iters):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
    times.sort()
    mid = len(times) // 2
    typical = {"median": times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid]),
               "min": times[0], "mean": sum(times) / len(times)}[cfg.statistic]
    return typical, times[0], times[-1]


def rank_main(rank: int, world: int, local_rank: int, cfg: MeasureConfig, init_method: str,
               emit: Callable[[tuple], None]) -> None:
    """One rank's sweep; every event goes through ``emit``."""
    import torch
    import torch.distributed as dist

    current: tuple[str, int] = ("init", 0)
    try:
        if cfg.backend == "gloo":
            torch.set_num_threads(1)
            device = torch.device("cpu")
        else:
            if not torch.cuda.is_available():
                raise RuntimeError("backend nccl needs CUDA GPUs, and torch sees none (use --backend gloo)")
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
        dist.init_process_group(cfg.backend, init_method=init_method, rank=rank, world_size=world,
                                timeout=_dt.timedelta(seconds=cfg.timeout_s + 60))
        hosts: list[Any] = [None] * world
        dist.all_gather_object(hosts, socket.gethostname())
        if rank == 0:
            emit(("hello", rank, hosts, _device_name(torch, device), _library_version(torch, cfg.backend)))
        dtype = getattr(torch, cfg.dtype)
        elem = DTYPES[cfg.dtype]
        # Connections, allocator and threads come up on the first calls: spend them before any timing.
        _, first = _buffers(torch, Collective.ALL_REDUCE, min(max(cfg.sizes_bytes), 2**20), world, dtype, elem, device)
        for _ in range(3):
            first()
        for op in cfg.ops:
            for size in cfg.sizes_bytes:
                current = (op.value, size)
                emit(("begin", rank, op.value, size))
                _fault(rank, size)
                moved, run = _buffers(torch, op, size, world, dtype, elem, device)
                emit(("call", rank, op.value, size))
                typical, lo, hi = _time_one(torch, run, cfg, device)
                slowest = torch.tensor([typical], dtype=torch.float64, device=device)
                dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
                if rank == 0:
                    t = float(slowest.item())
                    algbw = moved / t
                    emit(("row", rank, MeasurementRow(
                        op=op.value, gpus=world, size_bytes=moved, count=moved // elem, dtype=cfg.dtype,
                        time_s=t, time_min_s=lo, time_max_s=hi, algbw_bytes_per_s=algbw,
                        busbw_bytes_per_s=algbw * bus_bandwidth_factor(op, world), iters=cfg.iters)))
                emit(("end", rank, op.value, size))
        dist.barrier()
        dist.destroy_process_group()
        emit(("done", rank))
    except Exception as exc:  # reported to the launcher, which names the rank and size
        emit(("error", rank, current[0], current[1], f"{type(exc).__name__}: {exc}".splitlines()[0][:300]))
        raise


def _device_name(torch: Any, device: Any) -> str:
    if device.type == "cuda":
        return str(torch.cuda.get_device_name(device))
    return "cpu"


def _library_version(torch: Any, backend: str) -> str | None:
    if backend == "nccl":
        try:
            return ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception:  # noqa: BLE001 - provenance only
            return None
    return None


PR_SET_PDEATHSIG = 1
"""``prctl`` option (linux/prctl.h): the signal this process gets when its parent dies."""


def die_with_parent(parent_pid: int) -> None:
    """End this process when the launcher ``parent_pid`` dies, however it dies (SIGKILL included).

    On Linux the kernel sends SIGKILL through ``prctl(PR_SET_PDEATHSIG)``; everywhere a daemon
    thread also checks once every 0.5 s that the parent is still ``parent_pid`` (an orphan is
    re-parented) and exits if not. Without either, a rank whose launcher was killed blocks for
    minutes writing to a queue nobody reads."""
    import signal
    import sys
    import threading

    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no libc prctl: the watchdog below still runs
            pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(1)

    def watchdog() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watchdog, name="commcost-parent-watchdog", daemon=True).start()


class RankChannel:
    """A rank's events to the launcher over its own one-way pipe (``multiprocessing.Pipe``).

    A pipe holds no named semaphore, so when the launcher is SIGKILLed multiprocessing's resource
    tracker has nothing left to clean up and prints nothing (a shared ``Queue`` holds a lock, which the
    tracker reported as a leaked semaphore, two lines after the shell prompt)."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def put(self, event: Any) -> None:
        self.conn.send(event)

    def close(self) -> None:
        self.conn.close()

    def join_thread(self) -> None:
        """Nothing to flush: ``send`` writes to the pipe before it returns."""


def spawned_worker(rank: int, world: int, cfg: MeasureConfig, init_method: str, events: Any,
                   parent_pid: int | None = None) -> None:
    """Entry point of a spawned rank (module level so that ``spawn`` can import it)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the launcher's to handle; it ends the ranks
    if parent_pid is not None:
        die_with_parent(parent_pid)
    code = 0
    try:
        rank_main(rank, world, rank, cfg, init_method, events.put)
    except Exception:  # noqa: BLE001 - already reported through the queue
        code = 1
    events.close()
    events.join_thread()  # flush the events before leaving
    os._exit(code)
