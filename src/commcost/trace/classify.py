"""What each trace event is: compute, communication, memory, a step, a collective call.

The rules (names as Kineto writes them; HTA 0.5.0 ``hta/utils/utils.py`` for the GPU ones):

* **GPU events** are ``ph: "X"`` events whose ``cat`` is ``kernel``, ``gpu_memcpy`` or
  ``gpu_memset`` (HTA: events with a ``stream``; ``gpu_user_annotation`` is dropped,
  as HTA's parser drops it by default).
* A GPU event is **communication** when its name matches ``^(nccl|rccl).*Kernel``
  (HTA: ``^nccl.*Kernel``; RCCL names its kernels ``ncclKernel...``/``ncclDevKernel...``
  too; the ``rccl`` prefix is commcost's addition); **memory** when it matches
  ``^(Memcpy|Memset|dma)`` (or is a ``gpu_memcpy``/``gpu_memset`` event); **other**
  when its name contains ``Memcpy``/``Sync`` or starts with ``Memset`` (HTA's
  ``is_compute_kernel`` negation); **compute** otherwise.
* **CPU-only traces** (no GPU event at all, e.g. gloo on CPU): communication is the
  ``gloo:<op>`` annotations the gloo worker threads record (and ``nccl:<op>`` where a
  CPU trace has them); compute is every ``cpu_op`` except the collective entry points
  (``c10d::*``, ``record_param_comms``) on threads that run no communication.
* **Steps** are ``ProfilerStep#N`` annotations (``cat`` ``user_annotation`` or ``cpu_op``).
* **Collective calls** are ``record_param_comms`` CPU ops (sizes in ``In msg nelems``,
  ``Out msg nelems``, ``dtype``, ``Group size``, ``Collective name``; older traces only
  ``Input Dims``/``Input type``), and, in CPU traces, the ``gloo:<op>`` annotations
  (``Input Dims``, ``Input type``).
"""

from __future__ import annotations

import re

from commcost.comm.collectives import Collective

__all__ = ["COMPUTE", "COMMUNICATION", "MEMORY", "OTHER", "GPU_CATEGORIES", "gpu_kind", "kernel_collective",
           "collective_from_trace_name", "dtype_bytes", "is_cpu_comm", "is_cpu_comm_entry", "step_number"]

COMPUTE, COMMUNICATION, MEMORY, OTHER = "compute", "communication", "memory", "other"
GPU_CATEGORIES = frozenset(("kernel", "gpu_memcpy", "gpu_memset"))
"""Kineto categories of events that run on a GPU stream."""

_COMM_RE = re.compile(r"^(?:nccl|rccl).*Kernel")
_MEMORY_RE = re.compile(r"^(?:Memcpy|Memset|dma)")
_NOT_COMPUTE_RE = re.compile(r"(?:.*Memcpy)|(?:Memset)|(?:.*Sync)")
_KERNEL_OP_RE = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)")
_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")

_OPS = {
    "allreduce": Collective.ALL_REDUCE, "allreducecoalesced": Collective.ALL_REDUCE,
    "allgather": Collective.ALL_GATHER, "allgatherbase": Collective.ALL_GATHER,
    "allgatherintotensorcoalesced": Collective.ALL_GATHER, "allgathercoalesced": Collective.ALL_GATHER,
    "reducescatter": Collective.REDUCE_SCATTER, "reducescatterbase": Collective.REDUCE_SCATTER,
    "reducescattertensorcoalesced": Collective.REDUCE_SCATTER,
    "broadcast": Collective.BROADCAST, "reduce": Collective.REDUCE,
    "alltoall": Collective.ALL_TO_ALL, "alltoallbase": Collective.ALL_TO_ALL, "alltoallv": Collective.ALL_TO_ALL,
    "sendrecv": Collective.SEND_RECV, "send": Collective.SEND_RECV, "recv": Collective.SEND_RECV,
}

_DTYPE_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "c10::half": 2,
    "bfloat16": 2, "c10::bfloat16": 2, "bf16": 2, "fp16": 2, "fp32": 4,
    "int": 4, "int32": 4, "long": 8, "long int": 8, "int64": 8, "short": 2, "short int": 2, "int16": 2,
    "byte": 1, "unsigned char": 1, "uint8": 1, "char": 1, "signed char": 1, "int8": 1, "bool": 1,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1,
}


def gpu_kind(name: str, cat: str) -> str:
    """COMPUTE, COMMUNICATION, MEMORY or OTHER for a GPU event (module docstring)."""
    if _COMM_RE.match(name):
        return COMMUNICATION
    if cat != "kernel" or _MEMORY_RE.match(name):
        return MEMORY
    if _NOT_COMPUTE_RE.match(name):
        return OTHER
    return COMPUTE


def collective_from_trace_name(text: str) -> Collective | None:
    """The collective a trace names: ``allreduce``, ``all_gather``, ``_allgather_base``, ``AllReduce`` ..."""
    key = re.sub(r"[^a-z]", "", text.lower())
    return _OPS.get(key)


def kernel_collective(name: str) -> Collective | None:
    """The collective of a NCCL/RCCL kernel (``ncclKernel_AllReduce_RING_LL_Sum_float`` -> all_reduce)."""
    m = _KERNEL_OP_RE.match(name)
    return collective_from_trace_name(m.group(1)) if m else None


def dtype_bytes(name: str | None) -> int | None:
    """Bytes per element of a Kineto dtype (``Float``, ``BFloat16``, ``c10::Half``, ``long int`` ...)."""
    if not name:
        return None
    return _DTYPE_BYTES.get(str(name).strip().lower())


def is_cpu_comm(name: str) -> bool:
    """A communication interval of a CPU trace: ``gloo:all_reduce``, ``nccl:all_reduce`` ..."""
    return name.startswith(("gloo:", "nccl:"))


def is_cpu_comm_entry(name: str) -> bool:
    """A collective's entry point on the calling thread (not compute): ``c10d::*``, ``record_param_comms``."""
    return name.startswith("c10d::") or name == "record_param_comms"


def step_number(name: str) -> int | None:
    """N of ``ProfilerStep#N``, or None."""
    m = _STEP_RE.match(name)
    return int(m.group(1)) if m else None
