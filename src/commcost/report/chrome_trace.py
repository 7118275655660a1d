"""A simulated DDP step (:class:`commcost.step.timeline.Timeline`), or a plan's accounting
(:func:`plan_chrome_trace`), as a Chrome trace.

The file opens in Perfetto (ui.perfetto.dev) and chrome://tracing, and is shaped like
a PyTorch profiler (Kineto) trace so that ``commcost trace`` reads it back:

* GPU process ``pid 0``: the compute stream (``tid`` :data:`COMPUTE_STREAM`) holds each
  micro-batch's forward ``[j t_c, j t_c + (1 - f_b) t_c)`` and backward
  ``[.., (j+1) t_c)`` and the optimizer ``[max(t_e, end_n), step)``; the communication
  stream (``tid`` :data:`COMM_STREAM`) holds each bucket's all-reduce ``[start_i, end_i)``
  as a ``kernel`` event named ``ncclDevKernel_AllReduce_...`` (so it classifies as
  communication), with its bucket index, bytes, ready time and cost in ``args``.
* CPU process ``pid 1``: one ``ProfilerStep#1`` around the step, a ``cudaLaunchKernel``
  runtime event per kernel at its start (bucket: its ready time) sharing the kernel's
  ``correlation``, and a ``record_param_comms`` op per bucket with Kineto's arguments
  (``Collective name`` ``allreduce``, ``In/Out msg nelems``, ``dtype``, ``Group size``).

Read back, ``E = |U(comm) \\ U(compute)| = max(0, end_n - t_e)``: every bucket is ready by
``t_e``, so after it the stream runs without a gap until ``end_n``, and the optimizer
starts only then; that is the timeline's ``exposed_s`` (tests/report/test_chrome_trace.py).
Times are microseconds (Kineto's unit), from the step's start.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from commcost.core.errors import InputError
from commcost.step.timeline import Timeline, TimelineInputs
from commcost.core.files import write_atomic
from commcost.core.strict_json import find_non_finite

__all__ = ["COMPUTE_STREAM", "COMM_STREAM", "timeline_chrome_trace", "write_timeline_trace", "plan_chrome_trace",
           "write_trace"]

COMPUTE_STREAM = 7
"""``tid``/``stream`` of the compute stream (PyTorch's default stream shows as 7 in Kineto traces)."""
COMM_STREAM = 20
"""``tid``/``stream`` of the communication stream."""
_GPU_PID, _CPU_PID, _CPU_TID = 0, 1, 1
_DTYPES = {1: "Byte", 2: "BFloat16", 4: "Float", 8: "Double"}
_US = 1e6  # seconds -> microseconds


def _x(name: str, cat: str, pid: int, tid: int, start_s: float, end_s: float, args: dict) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": start_s * _US,
            "dur": max(0.0, end_s - start_s) * _US, "args": args}


def timeline_chrome_trace(tl: Timeline, inputs: TimelineInputs) -> dict[str, Any]:
    """The Chrome-trace object of one simulated step (module docstring)."""
    k, t_c, f_b = inputs.grad_accum, inputs.step_s, inputs.backward_fraction
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": _GPU_PID, "args": {"name": "GPU 0 (commcost simulated)"}},
        {"ph": "M", "name": "thread_name", "pid": _GPU_PID, "tid": COMPUTE_STREAM, "args": {"name": "compute stream"}},
        {"ph": "M", "name": "thread_name", "pid": _GPU_PID, "tid": COMM_STREAM,
         "args": {"name": "communication stream (DDP buckets)"}},
        {"ph": "M", "name": "process_name", "pid": _CPU_PID, "args": {"name": "CPU (commcost simulated)"}},
        _x("ProfilerStep#1", "user_annotation", _CPU_PID, _CPU_TID, 0.0, tl.step_s, {}),
    ]
    correlation = 0

    def kernel(name: str, stream: int, start_s: float, end_s: float, launch_s: float, extra: dict) -> None:
        nonlocal correlation
        correlation += 1
        events.append(_x("cudaLaunchKernel", "cuda_runtime", _CPU_PID, _CPU_TID, launch_s, launch_s,
                         {"correlation": correlation}))
        events.append(_x(name, "kernel", _GPU_PID, stream, start_s, end_s,
                         {"device": 0, "stream": stream, "correlation": correlation, **extra}))

    for j in range(k):
        t0 = j * t_c
        split = t0 + (1.0 - f_b) * t_c
        kernel(f"forward (micro-batch {j + 1} of {k})", COMPUTE_STREAM, t0, split, t0, {})
        kernel(f"backward (micro-batch {j + 1} of {k})", COMPUTE_STREAM, split, t0 + t_c, split, {})
    end_n = tl.buckets[-1].end_s if tl.buckets else 0.0
    if tl.optimizer_s > 0:
        opt_start = max(tl.compute_s, end_n)
        kernel("optimizer", COMPUTE_STREAM, opt_start, opt_start + tl.optimizer_s, opt_start, {})
    b = inputs.bytes_per_grad
    dtype = _DTYPES.get(b, "Byte")
    per_elem = b if b in _DTYPES else 1
    for i, bk in enumerate(tl.buckets):
        nelems = round(bk.size_bytes / per_elem)
        events.append(_x("record_param_comms", "cpu_op", _CPU_PID, _CPU_TID, bk.ready_s, bk.ready_s, {
            "Collective name": "allreduce", "In msg nelems": nelems, "Out msg nelems": nelems, "dtype": dtype,
            "Group size": inputs.gpus, "bucket": i}))
        kernel(f"ncclDevKernel_AllReduce_Sum_{dtype}_RING (bucket {i})", COMM_STREAM, bk.start_s, bk.end_s,
               bk.ready_s, {"bucket": i, "size_bytes": bk.size_bytes, "ready_us": bk.ready_s * _US,
                            "cost_us": (bk.end_s - bk.start_s) * _US})
    return {"schemaVersion": 1, "displayTimeUnit": "ms", "traceName": "commcost timeline (simulated)",
            "distributedInfo": {"backend": getattr(inputs.comm, "backend", "nccl"), "rank": 0,
                                "world_size": inputs.gpus},
            "commcost": {"exposed_s": tl.exposed_s, "wire_s": tl.wire_s, "step_s": tl.step_s,
                         "buckets": len(tl.buckets)},
            "traceEvents": events}


def write_timeline_trace(path: str | Path, tl: Timeline, inputs: TimelineInputs) -> None:
    """Write :func:`timeline_chrome_trace` to ``path`` (``.json``), atomically."""
    write_trace(path, timeline_chrome_trace(tl, inputs))


_KERNEL_OP = {"all_reduce": "AllReduce", "reduce_scatter": "ReduceScatter", "all_gather": "AllGather",
              "broadcast": "Broadcast", "reduce": "Reduce", "all_to_all": "AllToAll", "send_recv": "SendRecv"}


def _plan_header(p) -> tuple[list[str], list[dict[str, Any]]]:
    """``(dims, events)`` of :func:`plan_chrome_trace`: the plan's communication dimensions in order of first
    appearance, and the trace's opening events (process and stream names, the step's annotation)."""
    dims: list[str] = []
    for line in p.comm:
        if line.comm.dimension not in dims:
            dims.append(line.comm.dimension)
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": _GPU_PID, "args": {"name": "GPU 0 (commcost plan: accounting)"}},
        {"ph": "M", "name": "thread_name", "pid": _GPU_PID, "tid": COMPUTE_STREAM, "args": {"name": "compute"}},
        *({"ph": "M", "name": "thread_name", "pid": _GPU_PID, "tid": COMM_STREAM + i,
           "args": {"name": f"{d} communication"}} for i, d in enumerate(dims)),
        {"ph": "M", "name": "process_name", "pid": _CPU_PID, "args": {"name": "CPU (commcost plan)"}},
        _x("ProfilerStep#1", "user_annotation", _CPU_PID, _CPU_TID, 0.0, p.step_s, {}),
    ]
    return dims, events


def plan_chrome_trace(p) -> dict[str, Any]:
    """One GPU's step of a :class:`commcost.analyses.plan.plan.Plan` as a Chrome trace: its *accounting*, laid out.

    ``plan`` prices a step as ``compute + bubble + exposed + optimizer`` and states which part of each
    dimension's communication hides; it does not order kernels. This draws exactly that: the compute
    stream runs ``[0, C)``; each dimension has a communication stream (``tid`` :data:`COMM_STREAM` +
    its index) whose hidden part ``time - exposed`` is drawn inside ``[0, C)`` (behind compute, the
dimensions one after another while they fit) and
    whose exposed part is drawn after ``C + bubble``, one dimension after another, with no compute
    under it; then the losses that grow with the job (:mod:`commcost.step.losses`, an idle annotation) and the
    optimizer. Read back by ``commcost trace``: compute ``C + optimizer``,
    exposed communication ``sum exposed`` = ``plan``'s ``exposed_comm_s``, idle = the bubble and the losses, step
    = ``plan``'s ``step_s`` (tests/report/test_chrome_trace.py). The order inside each span is
    commcost's drawing, not a measured or simulated schedule; the bucket timeline of
    ``timeline --trace-out`` is a simulation.
    """
    C, bubble = p.compute_s, p.pipeline_bubble_s
    dims, events = _plan_header(p)
    correlation = 0

    def kernel(name: str, stream: int, start_s: float, end_s: float, extra: dict) -> None:
        nonlocal correlation
        if end_s <= start_s:
            return
        correlation += 1
        events.append(_x("cudaLaunchKernel", "cuda_runtime", _CPU_PID, _CPU_TID, start_s, start_s,
                         {"correlation": correlation}))
        events.append(_x(name, "kernel", _GPU_PID, stream, start_s, end_s,
                         {"device": 0, "stream": stream, "correlation": correlation, **extra}))

    kernel("compute (all micro-batches)", COMPUTE_STREAM, 0.0, C, {})
    if bubble > 0:
        events.append(_x("pipeline bubble (idle)", "user_annotation", _CPU_PID, _CPU_TID, C, C + bubble, {}))
    hidden_at = 0.0  # hidden parts one after another inside [0, C), so their union is their sum
    t = C + bubble
    for line in p.comm:
        d, op = line.comm.dimension, line.comm.op.value
        stream = COMM_STREAM + dims.index(d)
        name = f"ncclDevKernel_{_KERNEL_OP.get(op, 'AllReduce')}_Sum_bf16_RING ({d})"
        args = {"dimension": d, "op": op, "size_bytes": line.comm.size_bytes, "group_size": line.comm.group_size,
                "count_per_step": line.comm.count_per_step, "time_s": line.time_s, "exposed_s": line.exposed_s}
        hidden = max(0.0, line.time_s - line.exposed_s)
        start = hidden_at
        end = min(C, start + hidden)
        kernel(name + " hidden", stream, start, end, args)
        hidden_at = end
        kernel(name + " exposed", stream, t, t + line.exposed_s, args)
        t += line.exposed_s
    if p.losses.total_s > 0:   # the losses that grow with the job (commcost.step.losses): waiting, then the optimizer
        events.append(_x("losses that grow with the job (waiting)", "user_annotation", _CPU_PID, _CPU_TID, t,
                         t + p.losses.total_s, p.losses.to_dict()))
        t += p.losses.total_s
    kernel("optimizer", COMPUTE_STREAM, t, t + p.optimizer_s, {})
    return {"schemaVersion": 1, "displayTimeUnit": "ms", "traceName": "commcost plan (accounting, one GPU)",
            "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": p.inputs.layout.world},
            "commcost": {"step_s": p.step_s, "compute_s": C, "pipeline_bubble_s": bubble,
                         "exposed_comm_s": p.exposed_comm_s, "optimizer_s": p.optimizer_s},
            "traceEvents": events}


def write_trace(path: str | Path, trace: dict[str, Any], flag: str = "--trace-out") -> None:
    """Write a Chrome-trace object to ``path`` (``.json``), atomically."""

    p = Path(path)
    if p.suffix.lower() != ".json":
        raise InputError(f"{flag} {str(p)!r}: a Chrome trace file name must end in .json")
    if p.is_dir() or not p.parent.is_dir():
        raise InputError(f"{flag} {str(p)!r}: not a file in an existing directory")

    bad = find_non_finite(trace)
    if bad is not None:  # refused before the file is touched, naming the value
        raise InputError(f"the Chrome trace {bad[0]} is not a finite number ({bad[1]}): an input is outside the "
                         "range the model can price")
    write_atomic(p, json.dumps(trace, allow_nan=False) + "\n")
