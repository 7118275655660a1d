"""NCCL's memory on a GPU, outside torch's caching allocator: one communicator per parallel group.

What ``nvidia-smi`` shows a training process use beyond ``torch.cuda.max_memory_reserved`` is the CUDA context
(:data:`commcost.workload.memory.CONTEXT_BYTES`) and NCCL's buffers: every communicator a GPU is in holds the
buffers of its connections (per channel and peer, one per protocol), and on an NVLink-SHARP system (NVSwitch of
Hopper and Blackwell) a communicator of more than two GPUs of a node also holds NCCL's NVLS buffers. The sizes are
NCCL's defaults (its source, tests/data/SOURCES.md) and one public measurement of a PyTorch process group; the
groups are the layout's (:func:`nccl_buffer_bytes`).
"""

from __future__ import annotations

from commcost.hardware.registry import gpus

__all__ = ["NCCL_CONNECTION_BYTES", "NCCL_MIN_RING_CHANNELS", "NCCL_COMM_BYTES", "NCCL_P2P_NET_CHUNK_BYTES",
           "NCCL_SHARED_STEPS", "NCCL_P2P_NET_BYTES", "NVLS_CHANNELS", "NVLS_STEP_BYTES",
           "NVLS_MAX_HEADS", "NVLS_NVLINKS", "EXTRA_GROUPS", "nccl_buffer_bytes", "nvls_capable"]

NCCL_CONNECTION_BYTES = 4 * 2**20 + 4_915_200 + 524_288
"""``B_conn``: the buffers of one NCCL connection, one per protocol: Simple ``NCCL_BUFFSIZE`` 4 MiB, LL128
120 x 640 x 8 x 8 = 4,915,200 and LL 8 x 512 x 8 x 16 = 524,288 bytes (NCCL ``init.cc`` ``DEFAULT_BUFFSIZE``,
``DEFAULT_LL128_BUFFSIZE``, ``DEFAULT_LL_BUFFSIZE``; ``device.h`` thread and step counts): 9.19 MiB."""
NCCL_MIN_RING_CHANNELS = 16
"""``C_lo``: the channels of the low estimate, as many as NCCL's NVLS channels (:data:`NVLS_CHANNELS`; NCCL logs show
16 ring channels on 8 H800)."""
NCCL_COMM_BYTES = (NCCL_MIN_RING_CHANNELS * NCCL_CONNECTION_BYTES, 544e6, 688e6)
"""``M_c``: what one NCCL communicator takes on a GPU outside torch's allocator. Low: only its ring's connections,
``C_lo B_conn`` = 16 x 9.19 MiB = 147 MiB (NCCL 2.22+ connects an algorithm's peers when a collective first uses it,
``NCCL_RUNTIME_CONNECT``). High: what PyTorch measured per process group on 4 A100s with NVLink, each group running
one 4 MB all-reduce, 544 MB for two ranks and 688 MB for more (NVIDIA/nccl issue #964; ring and tree connected at
creation, NCCL before 2.22)."""
NCCL_P2P_NET_CHUNK_BYTES = 2**17
"""The step of a send/receive over the network: ``NCCL_P2P_NET_CHUNKSIZE``, 128 KiB, NCCL's ``p2pChunkSize`` where the
communicator spans nodes (NCCL ``src/init.cc`` ``computeBuffSizes``; since 2.29.2 twice that on Grace Blackwell,
not modelled; 2.12-2.13 sized the same 2 MiB a channel as ``2 NCCL_BUFFSIZE / SENDRECV_SLICEFACTOR``)."""
NCCL_SHARED_STEPS = 16
"""Steps of a channel in NCCL's shared send/receive pool (``NCCL_SHARED_STEPS``, NCCL ``src/transport/net.cc``)."""
NCCL_P2P_NET_BYTES = 2 * NCCL_MIN_RING_CHANNELS * NCCL_SHARED_STEPS * NCCL_P2P_NET_CHUNK_BYTES
"""``M_p2p``: the low end of a communicator that only sends and receives over the network (a pipeline group with
every peer on another node). NCCL does not give such a connection buffers per protocol: a send/receive connection
(``connIndex`` 1, no graph) is ``shared`` (``NCCL_NET_SHARED_BUFFERS`` default 1) and only the Simple protocol's
buffer is set up, from one pool per direction the communicator's network peers share (``sharedNetBuffersInit``:
``nChannels x NCCL_SHARED_STEPS x p2pChunkSize``, in GPU memory with GPUDirect RDMA; "Only allocate dedicated buffers
for ring/tree, not for p2p"), and from NCCL 2.22 the ring's connections wait for a collective
(``NCCL_RUNTIME_CONNECT``). With the low estimate's channels: 2 x 16 x 16 x 128 KiB = 64 MiB (send and receive)."""
NVLS_CHANNELS = 16
"""``C_nvls``: NCCL's NVLink SHARP channels (``NCCL_NVLS_NCHANNELS``, default 16: NCCL ``src/transport/nvls.cc``)."""
NVLS_STEP_BYTES = (1.0 * 2**20, 6.0 * 2**20)
"""``B_nvls``: the NVLS buffer per channel, head and direction (``nvlsPerRankSize = nChannels x 2 x B``,
``nvlsTotalSize = nvlsPerRankSize x nHeads``, NCCL ``src/transport/nvls.cc`` ``ncclNvlsSetup``/``ncclNvlsBufferSetup``):
from NCCL 2.22 ``NCCL_NVLS_CHUNKSIZE`` 128 KiB x ``NCCL_STEPS`` 8 = 1 MiB, allocated on the first NVLS collective
(``NCCL_RUNTIME_CONNECT``); in NCCL 2.17-2.21 ``NCCL_BUFFSIZE`` 4 MiB + ``NVLS_MEM_ALIGN_SIZE`` 2 MiB = 6 MiB, allocated
when the communicator is created (low and high end)."""
NVLS_MAX_HEADS = 32
"""The most NVLS heads a communicator sets buffers up for (NCCL ``device.h`` ``NCCL_MAX_NVLS_ARITY``)."""
NVLS_NVLINKS = ("nvlink4", "nvlink4_h800", "nvlink5")
"""The NVLink generations whose NVSwitch does multicast (NVLink SHARP: Hopper and Blackwell; gpus.json ``nvlink``):
where NCCL sets up NVLS buffers for a communicator of more than 2 GPUs of one node (``ncclNvlsInit``: ``gpuCount <= 2``
turns it off)."""


def nccl_buffer_bytes(xp, *, world, tp, cp, dp, pp, ep, gpus_per_node, nvls: bool, extra_groups: tuple[str, ...] = ()):
    """``(N_lo, N_hi)``: NCCL's buffers on one GPU, one communicator per parallel group it is in.

    The groups: the default (world) group of ``W`` ranks, which every job creates and uses (barriers) unless a
    dimension spans every rank (a one-dimensional device mesh is the default group), and one per dimension of more
    than one rank, in the device-mesh order both Megatron-Core (``tp-cp-ep-dp-pp``) and
    torchtitan (``pp, dp, cp, tp``, TP innermost) use: TP ``t``, CP ``c``, EP ``e``, DP ``d``, PP ``p``, each of
    ``n`` ranks with ``n_loc = max(1, min(n, G / stride))`` of them on this GPU's node (``stride`` the product of
    the dimensions inside it; EP's is ``t``). Each group costs :data:`NCCL_COMM_BYTES` ``M_c`` (low: its ring's
    connections; high: the measured 544 MB for ``n = 2``, 688 MB above; the pipeline group, which only sends and
    receives, at its low end :data:`NCCL_P2P_NET_BYTES` ``M_p2p`` where ``n_loc = 1``: every peer on another node,
    the network's shared send/receive pools), and on an NVLink-SHARP system (``nvls``: :data:`NVLS_NVLINKS`) a group with
    ``n_loc > 2`` adds NCCL's NVLS buffers ``2 C_nvls B_nvls min(n_loc, 32)`` (:data:`NVLS_CHANNELS`,
    :data:`NVLS_STEP_BYTES`, :data:`NVLS_MAX_HEADS`):

    ``N = sum_groups M_c(n) + [nvls and n_loc > 2] 2 C_nvls B_nvls min(n_loc, 32)``.

    A pipeline group whose peers share the node (``n_loc > 1``) keeps ``M_c``: NCCL's P2P transport gives a
    send/receive connection the buffers of every protocol (``src/transport/p2p.cc``, ``buffSizes[p]`` for each
    ``p``). The high end keeps the measured ``M_c`` (NCCL before 2.22 connected the ring and the tree at creation;
    PyTorch also runs a lone ``isend``/``irecv`` on a two-rank communicator of its own, ``getKeySendRecv``, and
    only a batch, ``batch_isend_irecv``, on the group's).

    ``extra_groups`` are the further groups a stack runs collectives on
    (:attr:`~commcost.workload.stacks.Stack.nccl_extra_groups`): ``dp``, a second data-parallel group of the same
    ranks (Megatron-Core creates the data-parallel group with and without context parallelism by two ``new_group``
    calls; the gradients go over the one, the reported loss over the other), and ``mp``, the model-parallel group of
    the ``t p`` ranks of one model replica (the gradient norm), ``n_loc = min(t, G) max(1, min(p, G / (t c d)))``,
    and ``world``, the default group of all ``W`` ranks as a communicator of its own also where a dimension spans
    every rank (a stack that builds every parallel group by ``new_group`` and still runs collectives on the default
    group: Megatron-LM's ``pretrain`` all-reduces its start time over it, ``torch.distributed.all_reduce(
    start_time_tensor, op=ReduceOp.MIN)`` on a CUDA tensor, and its timers all-gather the step's times over it,
    ``megatron/core/timers.py`` ``_get_elapsed_time_all_ranks``, ``all_gather_into_tensor`` without a group), counted only
    where the default group above is not (``[some dimension = W]``).

    Eight H100 in one group: 688 MB + 2 x 16 x 6 MiB x 8 = 688 MB + 1.5 GiB at the high end (NCCL 2.17-2.21, whose
    log prints ``nvlsTotalSize 1610612736`` for 16 channels on 8 GPUs). Array-safe in the degrees."""
    G = float(gpus_per_node)
    lo_c, two_c, hi_c = NCCL_COMM_BYTES
    low = high = 0.0
    spans_all = (tp == world) | (cp == world) | (ep == world) | (dp == world) | (pp == world)
    # (ranks n, stride of the ranks inside it or None for the model-parallel group, whether it is a communicator,
    # whether it only sends and receives: the pipeline group)
    groups = [(world, 1.0, (world > 1) * (1 - spans_all), False), (tp, 1.0, tp > 1, False),
              (cp, tp, cp > 1, False), (ep, tp, ep > 1, False), (dp, tp * cp, dp > 1, False),
              (pp, tp * cp * dp, pp > 1, True)]
    extra = {"dp": (dp, tp * cp, dp > 1, False), "mp": (tp * pp, None, tp * pp > 1, False),
             "world": (world, 1.0, (world > 1) * spans_all, False)}   # the default group where a dimension's is all W
    for name in extra_groups:
        if name not in EXTRA_GROUPS:
            raise ValueError(f"unknown NCCL group {name!r} (valid: {', '.join(EXTRA_GROUPS)})")
        groups.append(extra[name])
    for n, stride, on, p2p in groups:
        on = on * 1.0
        if stride is None:   # the model-parallel group: TP innermost, PP outermost
            local = xp.minimum(tp, G) * xp.maximum(1.0, xp.minimum(pp, G / (tp * cp * dp)))
        else:
            local = xp.maximum(1.0, xp.minimum(n, G / stride))
        heads = xp.minimum(local, NVLS_MAX_HEADS)
        shared = (local > 2) * on * (1.0 if nvls else 0.0) * 2.0 * NVLS_CHANNELS * heads
        net_p2p = (local == 1) * (1.0 if p2p else 0.0)   # every peer on another node: the shared pools alone
        low = low + on * (lo_c + (NCCL_P2P_NET_BYTES - lo_c) * net_p2p) + shared * NVLS_STEP_BYTES[0]
        high = high + on * (two_c + (hi_c - two_c) * (n > 2)) + shared * NVLS_STEP_BYTES[1]
    return low, high


EXTRA_GROUPS = ("dp", "mp", "world")
"""The further process groups a stack may run collectives on (:func:`nccl_buffer_bytes`)."""


def nvls_capable(gpu: str) -> bool:
    """Whether GPU preset ``gpu`` sits on an NVSwitch that does NVLink SHARP (gpus.json ``nvlink`` in
    :data:`NVLS_NVLINKS`)."""
    return gpus().get(gpu, {}).get("nvlink") in NVLS_NVLINKS
