"""One trace file -> :class:`RankTrace`: the few events the analysis needs, in SI units.

Streams the file (:func:`commcost.trace.reader.iter_trace`) and keeps, per event kind,
only what :mod:`commcost.trace.analysis` measures (module :mod:`commcost.trace.classify`
says what each kind is): GPU events as :class:`GpuEvent`, CUDA/HIP runtime launches
(correlation -> launch time), ``ProfilerStep#N`` windows, ``record_param_comms`` and
``gloo:*`` calls, and CPU op intervals (used only when the trace has no GPU event).
Kineto's ``ts``/``dur`` are microseconds; they become seconds here (``* 1e-6``) and
nowhere else.
"""

from __future__ import annotations

import gc
import math
import os
from array import array
from collections import namedtuple
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from commcost.core.errors import InputError
from commcost.trace import classify as C
from commcost.trace.reader import TraceHeader, iter_trace
from commcost.core.units import US

__all__ = ["GpuEvent", "CpuCall", "Step", "RankTrace", "load_rank"]

GpuEvent = namedtuple("GpuEvent", ("start_s", "end_s", "kind", "op", "stream", "correlation", "name"))
"""A kernel, memcpy or memset on a GPU stream; ``kind`` from :func:`classify.gpu_kind`,
``op`` the collective of a communication kernel (None otherwise)."""
CpuCall = namedtuple("CpuCall", ("start_s", "end_s", "tid", "name", "args"))
"""A ``record_param_comms`` op or a ``gloo:*`` annotation, with its args."""
Step = namedtuple("Step", ("number", "start_s", "end_s"))
"""One ``ProfilerStep#N`` annotation on the CPU."""

_STEP_CATS = frozenset(("user_annotation", "cpu_op"))
_RUNTIME_CATS = frozenset(("cuda_runtime", "cuda_driver", "hip_runtime", "hip_driver"))


@dataclass(frozen=True, slots=True, kw_only=True)
class RankTrace:
    """What one rank's trace holds, as the analysis needs it (seconds)."""

    path: str
    """The trace file."""
    rank: int
    """``distributedInfo.rank``, or the file's position in a directory without it."""
    world_size: int | None
    """``distributedInfo.world_size`` (None when the trace has no distributedInfo)."""
    backend: str | None
    """``distributedInfo.backend`` (nccl, gloo ...)."""
    gpu_events: tuple[GpuEvent, ...]
    """Kernels, memcpys and memsets, sorted by start."""
    launches: dict[int, tuple[float, int]]
    """Correlation id -> (launch time s, CPU thread) of every runtime event with one."""
    steps: tuple[Step, ...]
    """ProfilerStep windows, sorted by start."""
    comm_calls: tuple[CpuCall, ...]
    """record_param_comms ops and gloo/nccl CPU annotations, sorted by start."""
    c10d_ops: tuple[tuple[float, float, int, str, Any], ...]
    """(start s, end s, thread, name, ``Input Dims`` or None) of ``c10d::*`` ops (they name the collective
    a call belongs to, and in CPU traces issue the gloo work)."""
    cpu_ops: tuple[tuple[float, float, int], ...]
    """(start s, end s, thread) of CPU compute ops; filled only for traces without GPU events."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """The trace's other top-level keys (distributedInfo, baseTimeNanoseconds ...)."""
    events: int = 0
    """Events in traceEvents."""
    origin_s: float = 0.0
    """Every time above is seconds after this instant (the first event's ts, whole microseconds, in seconds)."""

    @property
    def on_gpu(self) -> bool:
        """True when the trace has GPU events (else the CPU-only rules apply)."""
        return bool(self.gpu_events)


class _Clock:
    """Kineto ``ts``/``dur`` (microseconds since an epoch) -> seconds since ``origin_us``.

    ``origin_us`` is the first event's ``ts`` rounded down to a whole microsecond;
    subtracting it in microseconds before scaling keeps sub-microsecond precision that
    ``ts * 1e-6`` at epoch scale (~1.7e9 s, float spacing ~2e-7 s) would lose. With
    ``round_us`` (HTA's default for traces with fractional timestamps,
    ``hta/common/trace_parser.py`` ``round_down_time_stamps``) every event shrinks to
    whole microseconds: start ``ceil(ts)``, end ``floor(ts + dur)``.
    """

    __slots__ = ("where", "origin_us", "round_us", "index")

    def __init__(self, where: str, round_us: bool) -> None:
        self.where, self.origin_us, self.round_us = where, None, round_us
        self.index = 0  # the event's position in traceEvents, for error messages

    def interval(self, e: dict) -> tuple[float, float]:
        ts, dur = e.get("ts"), e.get("dur", 0)
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or isinstance(ts, bool) \
                or isinstance(dur, bool):
            raise InputError(f"{self.where}: event {self.index} {_name(e)} has a non-numeric ts/dur "
                             f"({_shown(ts)}, {_shown(dur)})")
        if not (abs(ts) <= MAX_TIME_US and 0 <= dur <= MAX_TIME_US):  # also False for NaN
            raise InputError(f"{self.where}: event {self.index} {_name(e)} has ts {_shown(ts)}, dur {_shown(dur)} "
                             f"(need finite numbers of microseconds, |ts| and dur <= {MAX_TIME_US:.0e}, dur >= 0)")
        if self.origin_us is None:
            self.origin_us = math.floor(ts)
        if self.round_us:
            return (math.ceil(ts) - self.origin_us) * US, (math.floor(ts + dur) - self.origin_us) * US
        start = ts - self.origin_us
        return start * US, (start + dur) * US


MAX_TIME_US = 1e18
"""Largest ``|ts|`` and ``dur`` accepted, microseconds (~31,700 years; Kineto's epoch ``ts`` is ~1.7e15)."""
_INT64 = 2**63
"""``correlation`` ids and thread ids are 64-bit integers in Kineto (``int64_t``)."""


def _shown(value: Any) -> str:
    """A value for an error message, long ones cut (an integer of 400 digits is named by its length)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"an integer of {len(str(abs(value)))} digits"
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


def _name(e: dict) -> str:
    name = e.get("name")
    return _shown(name) if isinstance(name, str) else f"(name {_shown(name)})"


class _Checked:
    """The fields of one event that the loader uses, type-checked: a wrong type is an InputError
    naming the file, the event's index in ``traceEvents`` and its name (never a TypeError later)."""

    __slots__ = ("where",)

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, index: int, e: dict, what: str) -> None:
        raise InputError(f"{self.where}: event {index} {_name(e)}: {what}")

    def args(self, index: int, e: dict) -> dict:
        args = e.get("args")
        if args is None:
            return {}
        if not isinstance(args, dict):
            self.fail(index, e, f"field 'args' is {type(args).__name__} {_shown(args)}, expected an object")
        return args

    def tid(self, index: int, e: dict, key: str = "tid", value: Any = None):
        tid = e.get(key) if value is None else value
        if tid is None or isinstance(tid, str) or (isinstance(tid, int) and not isinstance(tid, bool)
                                                   and -_INT64 <= tid < _INT64):
            return tid
        self.fail(index, e, f"field {key!r} is {_shown(tid)}, expected an integer (64-bit) or a string")

    def correlation(self, index: int, e: dict, args: dict) -> int | None:
        corr = args.get("correlation")
        if corr is None:
            return None
        if isinstance(corr, bool) or not isinstance(corr, int):
            if isinstance(corr, (str, float)):
                return None  # not a correlation id Kineto writes: the event is not linked (as before)
            self.fail(index, e, f"args 'correlation' is {_shown(corr)}, expected an integer")
        if not -_INT64 <= corr < _INT64:
            self.fail(index, e, f"args 'correlation' is {_shown(corr)}, outside the 64-bit range of Kineto's ids")
        return corr


@contextmanager
def _no_cyclic_gc():
    """Python's cyclic garbage collector off for the block, back as it was after (also on an error).

    Parsing a trace allocates millions of dicts and lists (the events, a batch at a time) that reference
    counting frees; none is part of a reference cycle, so the collector finds nothing, yet it runs every
    700 allocations and walks every container still alive, more of them the larger the file: a quarter
    of the CPU time of a 1 GB trace. The flag is the process's: code on another thread that
    makes cyclic garbage in the meantime has it collected once the block ends."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_rank(path: str | os.PathLike, default_rank: int = 0, *, round_us: bool = False) -> RankTrace:
    """Read one trace file (streamed) into a :class:`RankTrace`; ``round_us``: HTA's rounding (:class:`_Clock`).
    The cyclic collector is off while it reads (:func:`_no_cyclic_gc`).

    GPU events, runtime launches and CPU ops are the bulk of a trace: they are kept in flat arrays (8 bytes
    a field) until the end, when only the launches of GPU events (and CPU ops of CPU-only traces) remain and
    the GPU events become GpuEvent tuples. Millions of small objects kept alive while millions more are
    parsed and dropped cost more per byte the larger the file (the collector walks every live container,
    and the survivors scatter the parser's allocations over a growing heap): before this, 1 GB measured 1.2x
    the CPU seconds per 100 MB of 200 MB."""
    with _no_cyclic_gc():
        return _load_rank(path, default_rank, round_us=round_us)


def _load_rank(path: str | os.PathLike, default_rank: int = 0, *, round_us: bool = False) -> RankTrace:
    p = os.fspath(path)
    clock = _Clock(p, round_us)
    interval = clock.interval
    header = TraceHeader(path=p)
    # GPU events, runtime launches and CPU ops: flat arrays until the end (load_rank's docstring)
    g_start, g_end, g_kind, g_stream, g_corr = array("d"), array("d"), array("q"), array("q"), array("q")
    l_corr, l_ts, l_tid = array("q"), array("d"), array("q")
    c_start, c_end, c_tid = array("d"), array("d"), array("q")
    tids: dict[object, int] = {}
    kinds: dict[tuple[str, str], int] = {}   # (name, cat) -> index in known
    known: list[tuple[str, str, object]] = []   # (interned name, kind, op)
    steps: list[Step] = []
    calls: list[CpuCall] = []
    c10d: list[tuple[float, float, int, str, Any]] = []
    comm_tids: set[int] = set()
    check = _Checked(p)
    for e in iter_trace(p, header):
        if e.get("ph") != "X":
            continue
        index = clock.index = header.events - 1
        cat, name = e.get("cat", ""), e.get("name", "")
        if not isinstance(cat, str):
            if cat is not None:
                check.fail(index, e, f"field 'cat' is {type(cat).__name__} {_shown(cat)}, expected a string")
            cat = ""
        if not isinstance(name, str):
            name = str(name) if isinstance(name, (int, float)) or name is None else check.fail(
                index, e, f"field 'name' is {type(name).__name__} {_shown(name)}, expected a string")
        if cat in C.GPU_CATEGORIES:
            s, t = interval(e)
            args = check.args(index, e)
            k = kinds.get((name, cat))
            if k is None:
                k = _new_kind(kinds, known, name, cat)
            corr = check.correlation(index, e, args)
            stream = check.tid(index, e, "stream", args["stream"]) if args.get("stream") is not None \
                else check.tid(index, e)
            g_start.append(s)
            g_end.append(t)
            g_kind.append(k)
            g_stream.append(tids.setdefault(stream, len(tids)))
            g_corr.append(-1 if corr is None else corr)
        elif cat in _RUNTIME_CATS:
            corr = check.correlation(index, e, check.args(index, e))
            if corr is not None:
                l_corr.append(corr)
                l_ts.append(interval(e)[0])
                l_tid.append(tids.setdefault(check.tid(index, e), len(tids)))
        elif name.startswith("ProfilerStep#") and cat in _STEP_CATS:
            n = C.step_number(name)
            if n is not None:
                s, t = interval(e)
                steps.append(Step(n, s, t))
        elif name == "record_param_comms" or C.is_cpu_comm(name):
            s, t = interval(e)
            tid = check.tid(index, e)
            calls.append(CpuCall(s, t, tid, name, check.args(index, e)))
            if C.is_cpu_comm(name):
                comm_tids.add(tid)
        elif name.startswith("c10d::"):
            s, t = interval(e)
            c10d.append((s, t, check.tid(index, e), name, check.args(index, e).get("Input Dims")))
        elif cat == "cpu_op" and not C.is_cpu_comm_entry(name):
            s, t = interval(e)
            c_start.append(s)
            c_end.append(t)
            c_tid.append(tids.setdefault(check.tid(index, e), len(tids)))
    info = header.metadata.get("distributedInfo") or {}
    if not isinstance(info, dict):
        info = {}
    rank, world = _rank_and_world(p, info, default_rank)
    steps.sort(key=lambda s: s.start_s)
    calls.sort(key=lambda c: c.start_s)
    tid_of = {i: t for t, i in tids.items()}
    gpu = _gpu_events(g_start, g_end, g_kind, g_stream, g_corr, known, tid_of)
    wanted = set(g_corr)
    launches = {c: (ts, tid_of[i]) for c, ts, i in zip(l_corr, l_ts, l_tid) if c in wanted}
    kept_cpu = () if gpu else tuple((a, b, tid_of[i]) for a, b, i in zip(c_start, c_end, c_tid)
                                    if tid_of[i] not in comm_tids)
    return RankTrace(path=p, rank=rank, world_size=world,
                     backend=info.get("backend") if isinstance(info.get("backend"), str) else None,
                     gpu_events=tuple(gpu), launches=launches, steps=tuple(steps), comm_calls=tuple(calls),
                     c10d_ops=tuple(sorted(c10d, key=lambda o: o[0])),
                     cpu_ops=kept_cpu, metadata=header.metadata, events=header.events,
                     origin_s=(clock.origin_us or 0) * US)


def _new_kind(kinds: dict, known: list, name: str, cat: str) -> int:
    """Index a GPU event's (name, category) the first time it is seen: ``known[i]`` holds (name, kind, op)."""
    kind = C.gpu_kind(name, cat)
    kinds[(name, cat)] = len(known)
    known.append((name, kind, C.kernel_collective(name) if kind == C.COMMUNICATION else None))
    return kinds[(name, cat)]


def _gpu_events(start, end, kind, stream, corr, known, tid_of) -> list[GpuEvent]:
    """The GPU events of the loader's arrays as GpuEvent tuples, sorted by start (ties in file order)."""
    return [GpuEvent(start[j], end[j], known[kind[j]][1], known[kind[j]][2], tid_of[stream[j]], corr[j],
                     known[kind[j]][0]) for j in sorted(range(len(start)), key=start.__getitem__)]


MAX_WORLD_SIZE = 10**6
"""Largest ``world_size`` accepted (the most GPUs any command takes)."""


def _rank_and_world(p: str, info: dict, default_rank: int) -> tuple[int, int | None]:
    """``distributedInfo``'s rank and world size, checked: 0 <= rank < world_size <= 10**6 (a negative
    rank or world size, or a boolean, is refused naming the field; a missing one takes its default)."""
    def field(key: str, lo: int, hi: int):
        v = info.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise InputError(f"{p}: distributedInfo field {key!r} is {_shown(v)}, expected an integer "
                             f"from {lo:,} to {hi:,}")
        return v
    world = field("world_size", 1, MAX_WORLD_SIZE)
    rank = field("rank", 0, (world or MAX_WORLD_SIZE) - 1)
    return (default_rank if rank is None else rank), world
