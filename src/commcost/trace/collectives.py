"""Each collective a trace recorded: bytes, measured time, algbw, busbw; priced by a CommModel.

**Calls.** A GPU trace records a ``record_param_comms`` CPU op per collective call; the
NCCL kernel it launched is found through the CUDA runtime events on the same thread
inside the op (their ``correlation`` is the kernel's), and the call's measured time
is ``t = max(kernel end) - min(kernel start)`` over those kernels. In a CPU (gloo)
trace each ``gloo:<op>`` annotation is one call, ``t`` its duration.

**Issue order.** Calls are listed in the order the calling thread issued them: on a GPU the
``record_param_comms`` op's start. A ``gloo:<op>`` annotation starts on the gloo worker thread
that runs the work, when it begins running it (``ProcessGroupGloo::AsyncWork::execute`` in
PyTorch's ``ProcessGroupGloo.cpp``), not when it was issued: works are queued and popped in issue
order, but by a pool of threads (two by default), so two works issued back to back can begin in
either order (in the suite's DDP trace, a step's two buckets issued 0.21 ms apart once began in
reverse, 21 us apart, on a loaded 2-core host). Nothing in the annotation names the call that
queued it, so each annotation is paired with a ``c10d::<op>`` on a calling thread: the earliest
not yet paired, of the same collective, started no later than the annotation, whose ``Input
Dims`` hold a tensor of the annotation's first input's element count (outermost ``c10d`` ops only,
on threads that record no annotation). The call's issue time is that op's start; an annotation
with no such op keeps its own start.

**Size** (as nccl-tests counts it, :mod:`commcost.comm.collectives`: the full buffer of
an all-reduce, the full output of an all-gather, the full input of a reduce-scatter):
``S = max(n_in, n_out) * b`` with ``n_in``/``n_out`` the ``In msg nelems``/``Out msg
nelems`` arguments and ``b`` the bytes of ``dtype``; older traces give only ``Input Dims``
and ``Input type`` (``S`` = product of the first input's dims times its element bytes).
The **op** is the ``Collective name`` argument, else the enclosing ``c10d::*`` op, else
the kernel's name. The **group size** ``P`` is ``Group size``, else the trace's world size
(then :attr:`CollectiveCall.group_size_source` says so).

**Communicator**: the call's ``Process Group Name``, else ``Process Group ID``, else ``Process
Group Ranks`` argument; without any, its group size (``size P``), else ``default``. Every rank of a
communicator issues its collectives in the same order (NCCL requires it), which is how
:mod:`commcost.trace.cross_rank` matches one instance across ranks.

**Bandwidths** (nccl-tests doc/PERFORMANCE.md): ``algbw = S / t``,
``busbw = algbw * f(op, P)`` with ``f`` :func:`commcost.comm.collectives.bus_bandwidth_factor`.

**Rows.** Calls with the same (op, S, P, dtype) form one :class:`CollectiveRow`. A kernel's
duration includes the time its rank waits for the last rank to arrive, so a call is matched
across the ranks in the trace (the ``k``-th call of that op and size on each rank, in issue
order) and timed by its fastest rank, ``min_r t_{k,r}`` -- the last rank to arrive waits least, so that is the
closest to the transfer itself (exact when every rank of the group is traced and the last
arrival does not wait at all); the row's time is the median of those over ``k``, as
nccl-tests reports one time per size. With one rank's trace the arrival wait stays in.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass

from commcost.comm.collectives import Collective, bus_bandwidth_factor
from commcost.trace import classify as C
from commcost.trace.load import RankTrace
from commcost.calibrate.data import Measurement
from commcost.calibrate.data import MeasurementRow

__all__ = ["CollectiveCall", "TimedCall", "CollectiveRow", "timed_calls", "sized_calls", "collective_calls", "collective_rows", "rows_to_measurement"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCall:
    """One recorded collective call on one rank."""

    rank: int
    """The rank that recorded it."""
    op: Collective
    """The collective."""
    size_bytes: int
    """``S`` (module docstring), bytes."""
    dtype: str
    """Element type as the trace names it."""
    group_size: int
    """``P``, ranks in its process group."""
    group_size_source: str
    """``Group size`` (the call's argument) or ``world_size`` (the trace's, when the call has none)."""
    start_s: float
    """When its first kernel (CPU: the annotation) started, seconds on the rank's clock."""
    issue_s: float
    """When the calling thread issued it (module docstring, **Issue order**), seconds on the rank's clock."""
    time_s: float
    """``t``, seconds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TimedCall:
    """One recorded call with a kernel (CPU: an annotation) to time it by, its size known or not."""

    rank: int
    """The rank that recorded it."""
    op: Collective
    """The collective."""
    size_bytes: int | None
    """``S`` (module docstring), bytes; None when the call's arguments record no size."""
    dtype: str | None
    """Element type as the trace names it (None without a size)."""
    group_size: int | None
    """``P``; None when neither the call nor the trace names it."""
    group_size_source: str
    """``Group size`` (the call's argument) or ``world_size`` (the trace's)."""
    comm: str
    """The communicator (module docstring, **Communicator**)."""
    start_s: float
    """First kernel start (CPU: the annotation's), seconds on the rank's clock."""
    end_s: float
    """Last kernel end (CPU: the annotation's), seconds on the rank's clock."""
    issue_s: float
    """When the calling thread issued it (module docstring, **Issue order**), seconds on the rank's clock."""

    @property
    def time_s(self) -> float:
        """``t = end_s - start_s``, seconds."""
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveRow:
    """The calls of one (op, size, group size, dtype)."""

    op: Collective
    """The collective."""
    size_bytes: int
    """``S``, bytes."""
    group_size: int
    """``P``."""
    dtype: str
    """Element type."""
    count: int
    """Calls pooled (all ranks)."""
    ranks: int
    """Ranks whose traces hold the call (the ``t`` below is the fastest of them)."""
    time_s: float
    """``median_k min_r t_{k,r}``: the median over the calls of the fastest rank's time, seconds."""
    time_min_s: float
    """Smallest ``min_r t_{k,r}``, seconds."""
    time_max_s: float
    """Largest ``min_r t_{k,r}``, seconds."""
    time_all_calls_median_s: float
    """Median over every call on every rank (arrival waits included), seconds."""

    @property
    def algbw_bytes_per_s(self) -> float | None:
        """``S / t``; None when ``t`` is 0."""
        return self.size_bytes / self.time_s if self.time_s > 0 else None

    @property
    def busbw_bytes_per_s(self) -> float | None:
        """``algbw * f(op, P)``."""
        a = self.algbw_bytes_per_s
        return None if a is None else a * bus_bandwidth_factor(self.op, self.group_size)


MAX_CALL_BYTES = 2**60
"""Largest size ``S`` a recorded call may have, 1 EiB (as the ``--size`` flags); larger, or negative,
is not a size a collective can move, and the call is left out (counted in ``calls_dropped``)."""
MAX_GROUP_SIZE = 10**6
"""Largest ``Group size`` a call may record (the most GPUs any command takes)."""


def _count(n) -> bool:
    """An element count: an integer (not a boolean) >= 0."""
    return isinstance(n, int) and not isinstance(n, bool) and n >= 0


def _size(args: dict) -> tuple[int | None, str]:
    """``(S, dtype)`` from a call's arguments (module docstring); ``S`` None when the arguments hold
    no size, or an impossible one (a negative count, past :data:`MAX_CALL_BYTES`)."""
    n_in, n_out = args.get("In msg nelems"), args.get("Out msg nelems")
    dtype = args.get("dtype")
    b = C.dtype_bytes(dtype) if isinstance(dtype, str) else None
    if b is not None and n_in is not None and n_out is not None:
        if not (_count(n_in) and _count(n_out)):
            return None, str(dtype)
        size = max(n_in, n_out) * b
        return (size if size <= MAX_CALL_BYTES else None), str(dtype)
    dims, types = args.get("Input Dims"), args.get("Input type")
    if isinstance(dims, list) and dims and isinstance(types, list) and types and isinstance(types[0], str):
        b = C.dtype_bytes(types[0])
        first = dims[0]
        if b is not None and isinstance(first, list) and first and all(_count(d) for d in first) \
                and all(d <= MAX_CALL_BYTES for d in first):
            size = math.prod(first) * b
            return (size if size <= MAX_CALL_BYTES else None), str(types[0])
    return None, str(dtype if isinstance(dtype, str) else "")


_PARENT_LOOKBACK = 64
"""c10d ops started before a call that are checked for enclosing it (they nest a few deep at most)."""


def _enclosing_c10d(rt: RankTrace, starts: list[float], call) -> str | None:
    """The ``c10d::*`` op on the call's thread that encloses it (the latest-started one), or None."""
    i = bisect.bisect_right(starts, call.start_s) - 1
    for j in range(i, max(-1, i - _PARENT_LOOKBACK), -1):
        s, e, tid, name, _ = rt.c10d_ops[j]
        if tid == call.tid and e >= call.end_s:
            return name
    return None


def _tensor_elements(dims, out: set[int]) -> set[int]:
    """Add the element count of every tensor in an ``Input Dims`` value (nested lists of ints) to ``out``."""
    if isinstance(dims, list):
        if dims and all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
            out.add(math.prod(dims))
        else:
            for d in dims:
                _tensor_elements(d, out)
    return out


def _issue_times(rt: RankTrace) -> dict[int, float]:
    """Index in ``rt.comm_calls`` of each CPU-trace annotation -> the start of the ``c10d::<op>``
    that issued it (module docstring, **Issue order**); annotations with none are absent."""
    worker_tids = {c.tid for c in rt.comm_calls if C.is_cpu_comm(c.name)}
    queues: dict[tuple[Collective, int], list[int]] = {}   # (op, elements) -> issuing ops, in start order
    issuers: list[float] = []                             # start of each issuing op
    taken: list[bool] = []
    outer_end: dict[object, float] = {}                   # thread -> end of its open outermost c10d op
    for s, e, tid, name, dims in rt.c10d_ops:
        if tid in worker_tids or s < outer_end.get(tid, -math.inf):
            continue
        outer_end[tid] = e
        op = C.collective_from_trace_name(name[len("c10d::"):])
        if op is None:
            continue
        for n in _tensor_elements(dims, set()):
            queues.setdefault((op, n), []).append(len(issuers))
        issuers.append(s)
        taken.append(False)
    heads = dict.fromkeys(queues, 0)
    out: dict[int, float] = {}
    for i, call in enumerate(rt.comm_calls):
        if not C.is_cpu_comm(call.name):
            continue
        op = C.collective_from_trace_name(call.name.split(":", 1)[1])
        dims = call.args.get("Input Dims")
        first = _tensor_elements(dims[0], set()) if isinstance(dims, list) and dims else set()
        if op is None or len(first) != 1:
            continue
        key = (op, first.pop())
        q, h = queues.get(key, ()), heads.get(key, 0)
        while h < len(q) and taken[q[h]]:
            h += 1
        if h < len(q) and issuers[q[h]] <= call.start_s:
            taken[q[h]] = True
            out[i] = issuers[q[h]]
            h += 1
        if key in heads:
            heads[key] = h
    return out


def _communicator(args: dict, group: int | None) -> str:
    """The process group a call ran on, as the trace names it (module docstring, **Communicator**)."""
    for key in ("Process Group Name", "Process Group ID", "Process Group Ranks"):
        v = args.get(key)
        if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v) != "":
            return f"{key.split()[-1].lower()} {v}"
    return f"size {group}" if group is not None else "default"


def _launches_by_thread(rt: RankTrace, comm: dict) -> dict[object, list[tuple[float, int]]]:
    """``{CPU thread: [(launch time, correlation), ...] sorted}`` of the communication kernels ``comm``."""
    by_tid: dict[object, list[tuple[float, int]]] = {}
    for corr in comm:
        launch = rt.launches.get(corr)
        if launch is not None:
            by_tid.setdefault(launch[1], []).append((launch[0], corr))
    for v in by_tid.values():
        v.sort()
    return by_tid


def _kernels_launched_in(call, by_tid: dict, comm: dict) -> list:
    """The kernels of ``comm`` that ``call``'s thread launched between its start and its end, in launch order."""
    launches = by_tid.get(call.tid, [])
    j = bisect.bisect_left(launches, (call.start_s, -1))
    kernels = []
    while j < len(launches) and launches[j][0] <= call.end_s:
        kernels.append(comm[launches[j][1]])
        j += 1
    return kernels


def _claim_by_annotation(later: list, by_tid: dict, kernel_ops) -> None:
    """Kernels no record_param_comms call claimed, by the annotation they were launched in: into ``kernel_ops``."""
    for call in later:
        op = C.collective_from_trace_name(call.name.split(":", 1)[1])
        launches = by_tid.get(call.tid, [])
        j = bisect.bisect_left(launches, (call.start_s, -1))
        while op is not None and j < len(launches) and launches[j][0] <= call.end_s:
            kernel_ops.setdefault(launches[j][1], op)
            j += 1


def timed_calls(rt: RankTrace, *, kernel_ops: dict | None = None) -> tuple[list[TimedCall], int]:
    """Every call of ``rt`` with a known op and a measured time, sized or not, in issue order
    (module docstring); and how many recorded calls had no kernel (or no op) to time them by.
    ``kernel_ops``, when given, is filled with ``{correlation: op}`` of every kernel a call was timed by: the op the
    program called (an all-to-all that NCCL runs as send/recv kernels is an all-to-all), which every section of the
    report names it by (:func:`commcost.trace.analysis.activities`)."""
    out: list[TimedCall] = []
    untimed = 0
    comm = {g.correlation: g for g in rt.gpu_events if g.kind == C.COMMUNICATION and g.correlation >= 0}
    by_tid = _launches_by_thread(rt, comm)
    c10d_starts = [o[0] for o in rt.c10d_ops]
    issued = {} if rt.on_gpu else _issue_times(rt)
    later: list = []
    for i, call in enumerate(rt.comm_calls):
        cpu = C.is_cpu_comm(call.name)
        if rt.on_gpu and cpu:
            if kernel_ops is not None:   # a backend's own annotation (nccl:_all_gather_base): names its kernels
                later.append(call)
            continue
        size, dtype = _size(call.args)
        if size is None and ("In msg nelems" in call.args or "Out msg nelems" in call.args):
            untimed += 1  # a recorded size that is impossible (negative, past 1 EiB): left out with the note
            continue
        if cpu:
            start, end = call.start_s, call.end_s
            op = C.collective_from_trace_name(call.name.split(":", 1)[1])
        else:
            kernels = _kernels_launched_in(call, by_tid, comm)
            if not kernels:
                untimed += 1
                continue
            start = min(k.start_s for k in kernels)
            end = max(k.end_s for k in kernels)
            op = C.collective_from_trace_name(str(call.args.get("Collective name", "")))
            if op is None:
                parent = _enclosing_c10d(rt, c10d_starts, call)
                op = C.collective_from_trace_name(parent[len("c10d::"):]) if parent else None
            if op is None:
                op = kernels[0].op
        if op is None:
            untimed += 1
            continue
        if kernel_ops is not None and not cpu:
            kernel_ops.update((k.correlation, op) for k in kernels)
        group = call.args.get("Group size")
        source = "Group size"
        if group is None:
            group, source = rt.world_size, "world_size"
        elif isinstance(group, bool) or not isinstance(group, int) or not 1 <= group <= MAX_GROUP_SIZE:
            untimed += 1  # recorded, but not a group size (true, 1e30, -3): the call is left out
            continue
        out.append(TimedCall(rank=rt.rank, op=op, size_bytes=size, dtype=dtype if size is not None else None,
                             group_size=group, group_size_source=source, comm=_communicator(call.args, group),
                             start_s=start, end_s=end, issue_s=issued.get(i, call.start_s)))
    _claim_by_annotation(later, by_tid, kernel_ops)
    out.sort(key=lambda c: c.issue_s)
    return out, untimed


def collective_calls(rt: RankTrace) -> tuple[list[CollectiveCall], int]:
    """Every call of ``rt`` with a known op, size and time, in issue order (module docstring);
    and how many recorded calls were left out (no size in their arguments, or no kernel found)."""
    return sized_calls(*timed_calls(rt))


def sized_calls(timed: list[TimedCall], untimed: int) -> tuple[list[CollectiveCall], int]:
    """The calls of ``timed`` with a size and a group size, and how many recorded calls that leaves
    out (``untimed`` plus the unsized): what :func:`collective_calls` returns, from :func:`timed_calls`'s result."""
    out = [CollectiveCall(rank=c.rank, op=c.op, size_bytes=c.size_bytes, dtype=c.dtype, group_size=c.group_size,
                          group_size_source=c.group_size_source, start_s=c.start_s, issue_s=c.issue_s,
                          time_s=c.end_s - c.start_s)
           for c in timed if c.size_bytes is not None and c.group_size is not None]
    return out, untimed + len(timed) - len(out)


def collective_rows(calls: list[CollectiveCall]) -> list[CollectiveRow]:
    """Pool ``calls`` by (op, size, group size, dtype), sorted by op then size (module docstring, **Rows**)."""
    per_rank: dict[int, list[CollectiveCall]] = {}
    for c in calls:
        per_rank.setdefault(c.rank, []).append(c)
    matched: dict[tuple, list[float]] = {}       # (key, k-th occurrence on its rank) -> time on each rank
    everything: dict[tuple, list[float]] = {}
    for rank_calls in per_rank.values():
        seen: dict[tuple, int] = {}
        for c in sorted(rank_calls, key=lambda c: c.issue_s):
            key = (c.op, c.size_bytes, c.group_size, c.dtype)
            k = seen.get(key, 0)
            seen[key] = k + 1
            matched.setdefault((key, k), []).append(c.time_s)
            everything.setdefault(key, []).append(c.time_s)
    samples: dict[tuple, list[float]] = {}
    ranks: dict[tuple, int] = {}
    for (key, _), ts in matched.items():
        samples.setdefault(key, []).append(min(ts))
        ranks[key] = max(ranks.get(key, 0), len(ts))
    rows = [CollectiveRow(op=op, size_bytes=S, group_size=P, dtype=dt, count=len(everything[(op, S, P, dt)]),
                          ranks=ranks[(op, S, P, dt)], time_s=statistics.median(ts), time_min_s=min(ts),
                          time_max_s=max(ts), time_all_calls_median_s=statistics.median(everything[(op, S, P, dt)]))
            for (op, S, P, dt), ts in samples.items()]
    return sorted(rows, key=lambda r: (r.op.value, r.group_size, r.size_bytes, r.dtype))


def rows_to_measurement(rows: list[CollectiveRow], provenance: dict):
    """The rows as a :class:`commcost.calibrate.data.Measurement` (``commcost fit`` reads it).

    ``count`` is ``S / b`` elements; ``iters`` the calls pooled; ``time_s`` the median.
    Rows on one rank (``P = 1``) carry no communication and are left out.
    """

    out = []
    for r in rows:
        if r.group_size < 2 or r.time_s <= 0:
            continue
        b = C.dtype_bytes(r.dtype) or 1
        out.append(MeasurementRow(op=r.op.value, gpus=r.group_size, size_bytes=r.size_bytes,
                                  count=r.size_bytes // b, dtype=r.dtype, time_s=r.time_s,
                                  time_min_s=r.time_min_s, time_max_s=r.time_max_s,
                                  algbw_bytes_per_s=r.algbw_bytes_per_s, busbw_bytes_per_s=r.busbw_bytes_per_s,
                                  iters=r.count))
    return Measurement(rows=tuple(out), provenance=provenance)
