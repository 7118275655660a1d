"""Direct tests of ``trace/classify.py``: what each trace event is, by the names PyTorch, NCCL and RCCL write."""

from __future__ import annotations

import pytest

from commcost.comm.collectives import Collective
from commcost.trace.classify import (COMMUNICATION, COMPUTE, MEMORY, OTHER, collective_from_trace_name, dtype_bytes,
                                     gpu_kind, is_cpu_comm, is_cpu_comm_entry, kernel_collective, step_number)


@pytest.mark.parametrize("name, cat, kind", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", "kernel", COMMUNICATION),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t", "kernel", COMMUNICATION),
    ("rcclKernel_ReduceScatter", "kernel", COMMUNICATION),
    ("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", MEMORY),
    ("Memset (Device)", "gpu_memset", MEMORY),
    ("void gemm_kernel<float>(float*)", "kernel", COMPUTE),
    ("cudaDeviceSync", "kernel", OTHER),
])
def test_gpu_kind(name, cat, kind):
    assert gpu_kind(name, cat) == kind


@pytest.mark.parametrize("text, op", [
    ("allreduce", Collective.ALL_REDUCE), ("all_gather", Collective.ALL_GATHER),
    ("_allgather_base", Collective.ALL_GATHER), ("ReduceScatter", Collective.REDUCE_SCATTER),
    ("alltoallv", Collective.ALL_TO_ALL), ("send", Collective.SEND_RECV), ("barrier", None),
])
def test_collective_from_trace_name(text, op):
    assert collective_from_trace_name(text) is op


def test_kernel_collective():
    assert kernel_collective("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*)") is Collective.ALL_REDUCE
    assert kernel_collective("ncclKernel_Broadcast_RING_LL_Sum_int8_t") is Collective.BROADCAST
    assert kernel_collective("void gemm_kernel<float>(float*)") is None


@pytest.mark.parametrize("name, size", [("Float", 4), ("BFloat16", 2), ("c10::Half", 2), ("long int", 8),
                                        ("float8_e4m3fn", 1), (" double ", 8), ("complex", None), (None, None)])
def test_dtype_bytes(name, size):
    assert dtype_bytes(name) == size


def test_cpu_names_and_steps():
    assert is_cpu_comm("gloo:all_reduce") and is_cpu_comm("nccl:all_gather") and not is_cpu_comm("aten::mm")
    assert is_cpu_comm_entry("c10d::allreduce_") and is_cpu_comm_entry("record_param_comms")
    assert not is_cpu_comm_entry("aten::add")
    assert step_number("ProfilerStep#12") == 12 and step_number("ProfilerStep#x") is None
    assert step_number("ProfilerStep#3 ") is None
