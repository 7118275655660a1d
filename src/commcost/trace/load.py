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

import math
import os
from array import array
from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any

from commcost.errors import InputError
from commcost.trace import classify as C
from commcost.trace.reader import TraceHeader, iter_trace
from commcost.units import US

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

    __slots__ = ("where", "origin_us", "round_us")

    def __init__(self, where: str, round_us: bool) -> None:
        self.where, self.origin_us, self.round_us = where, None, round_us

    def interval(self, e: dict) -> tuple[float, float]:
        ts, dur = e.get("ts"), e.get("dur", 0)
        if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or isinstance(ts, bool):
            raise InputError(f"{self.where}: complete event {e.get('name')!r} has a non-numeric ts/dur "
                             f"({ts!r}, {dur!r})")
        if not (math.isfinite(ts) and math.isfinite(dur)) or dur < 0:
            raise InputError(f"{self.where}: event {e.get('name')!r} has ts {ts!r}, dur {dur!r} "
                             "(need finite numbers, dur >= 0)")
        if self.origin_us is None:
            self.origin_us = math.floor(ts)
        if self.round_us:
            return (math.ceil(ts) - self.origin_us) * US, (math.floor(ts + dur) - self.origin_us) * US
        start = ts - self.origin_us
        return start * US, (start + dur) * US


def load_rank(path: str | os.PathLike, default_rank: int = 0, *, round_us: bool = False) -> RankTrace:
    """Read one trace file (streamed) into a :class:`RankTrace`; ``round_us``: HTA's rounding (:class:`_Clock`)."""
    p = os.fspath(path)
    clock = _Clock(p, round_us)
    interval = clock.interval
    header = TraceHeader(path=p)
    gpu: list[GpuEvent] = []
    # runtime launches and CPU ops are the bulk of a trace: kept in flat arrays (24 bytes each)
    # until the end, when only the launches of GPU events (and CPU ops of CPU-only traces) remain
    l_corr, l_ts, l_tid = array("q"), array("d"), array("q")
    c_start, c_end, c_tid = array("d"), array("d"), array("q")
    tids: dict[object, int] = {}
    kinds: dict[tuple[str, str], tuple[str, str, object]] = {}   # (name, cat) -> (interned name, kind, op)
    steps: list[Step] = []
    calls: list[CpuCall] = []
    c10d: list[tuple[float, float, int, str, Any]] = []
    comm_tids: set[int] = set()
    for e in iter_trace(p, header):
        if e.get("ph") != "X":
            continue
        cat, name = e.get("cat", ""), e.get("name", "")
        if not isinstance(name, str):
            name = str(name)
        if cat in C.GPU_CATEGORIES:
            s, t = interval(e)
            args = e.get("args") or {}
            known = kinds.get((name, cat))
            if known is None:
                kind = C.gpu_kind(name, cat)
                known = kinds[(name, cat)] = (name, kind, C.kernel_collective(name) if kind == C.COMMUNICATION
                                              else None)
            name, kind, op = known
            corr = args.get("correlation", -1)
            gpu.append(GpuEvent(s, t, kind, op, args.get("stream", e.get("tid")),
                                corr if isinstance(corr, int) else -1, name))
        elif cat in _RUNTIME_CATS:
            corr = (e.get("args") or {}).get("correlation")
            if isinstance(corr, int):
                l_corr.append(corr)
                l_ts.append(interval(e)[0])
                l_tid.append(tids.setdefault(e.get("tid"), len(tids)))
        elif name.startswith("ProfilerStep#") and cat in _STEP_CATS:
            n = C.step_number(name)
            if n is not None:
                s, t = interval(e)
                steps.append(Step(n, s, t))
        elif name == "record_param_comms" or C.is_cpu_comm(name):
            s, t = interval(e)
            calls.append(CpuCall(s, t, e.get("tid"), name, e.get("args") or {}))
            if C.is_cpu_comm(name):
                comm_tids.add(e.get("tid"))
        elif name.startswith("c10d::"):
            s, t = interval(e)
            c10d.append((s, t, e.get("tid"), name, (e.get("args") or {}).get("Input Dims")))
        elif cat == "cpu_op" and not C.is_cpu_comm_entry(name):
            s, t = interval(e)
            c_start.append(s)
            c_end.append(t)
            c_tid.append(tids.setdefault(e.get("tid"), len(tids)))
    info = header.metadata.get("distributedInfo") or {}
    if not isinstance(info, dict):
        info = {}
    rank = info.get("rank", default_rank)
    world = info.get("world_size")
    gpu.sort(key=lambda g: g.start_s)
    steps.sort(key=lambda s: s.start_s)
    calls.sort(key=lambda c: c.start_s)
    tid_of = {i: t for t, i in tids.items()}
    wanted = {g.correlation for g in gpu}
    launches = {c: (ts, tid_of[i]) for c, ts, i in zip(l_corr, l_ts, l_tid) if c in wanted}
    kept_cpu = () if gpu else tuple((a, b, tid_of[i]) for a, b, i in zip(c_start, c_end, c_tid)
                                    if tid_of[i] not in comm_tids)
    return RankTrace(path=p, rank=rank if isinstance(rank, int) else default_rank,
                     world_size=world if isinstance(world, int) else None,
                     backend=info.get("backend") if isinstance(info.get("backend"), str) else None,
                     gpu_events=tuple(gpu), launches=launches, steps=tuple(steps), comm_calls=tuple(calls),
                     c10d_ops=tuple(sorted(c10d, key=lambda o: o[0])),
                     cpu_ops=kept_cpu, metadata=header.metadata, events=header.events,
                     origin_s=(clock.origin_us or 0) * US)
