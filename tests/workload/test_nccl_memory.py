"""NCCL's buffers outside torch's allocator (commcost.workload.nccl_memory), one communicator per parallel group,
and the card's range that carries them (commcost.workload.memory.MemoryBreakdown.device_bytes)."""

from __future__ import annotations

import pytest

from commcost.core.xp import SCALAR
from commcost.parallel.layout import Layout
from commcost.workload.memory import memory_per_gpu
from commcost.workload.nccl_memory import NCCL_COMM_BYTES, NCCL_P2P_NET_BYTES, nccl_buffer_bytes, nvls_capable
from commcost.workload.transformer import TransformerSpec

SPEC = TransformerSpec(layers=2, hidden=64, heads=4, ffn_hidden=256, vocab=100)
S = 32


CONN = 4 * 2**20 + 4_915_200 + 524_288   # one NCCL connection: Simple 4 MiB + LL128 4,915,200 + LL 524,288 bytes
MiB = 2**20


def test_the_constants_by_hand():
    # low: 16 channels x one connection; high: the measured 544 MB (2 ranks) and 688 MB (more)
    assert NCCL_COMM_BYTES == (16 * CONN, 544e6, 688e6) and 16 * CONN == 154_140_672


def test_nccl_buffers_per_communicator_by_hand():
    # TP 2 x DP 4 on one node of 8 H100 (NVLS): groups world (8 ranks, 8 on the node: no dimension spans all 8),
    # TP (2, stride 1: 2 local), DP (4, stride 2: 4 local); PP, CP, EP of one rank make none.
    # low: 3 rings of 16 channels x 9,633,792 = 3 x 154,140,672 = 462,422,016; NVLS (NCCL 2.22+, 1 MiB) on the
    #      groups of more than 2 local GPUs: 2 x 16 x 1 MiB x (8 + 4) = 402,653,184 -> 865,075,200
    # high: 688 MB + 544 MB + 688 MB = 1,920,000,000; NVLS (NCCL 2.17-2.21, 4 + 2 MiB) 2 x 16 x 6 MiB x 12
    #      = 2,415,919,104 -> 4,335,919,104
    kw = dict(world=8, tp=2, cp=1, dp=4, pp=1, ep=1, gpus_per_node=8)
    assert 16 * CONN == 154_140_672
    assert nccl_buffer_bytes(SCALAR, **kw, nvls=True) == pytest.approx((865_075_200, 4_335_919_104), rel=1e-12)
    # without NVLink SHARP (A100): the rings and trees alone
    assert nccl_buffer_bytes(SCALAR, **kw, nvls=False) == pytest.approx((462_422_016, 1.92e9), rel=1e-12)
    # FSDP over the 8 GPUs: its one-dimensional mesh is the default group -> one communicator of 8
    #   low 154,140,672 + 2 x 16 x 1 MiB x 8 = 422,576,128; high 688e6 + 2 x 16 x 6 MiB x 8 = 2,298,612,736
    fsdp = nccl_buffer_bytes(SCALAR, world=8, tp=1, cp=1, dp=8, pp=1, ep=1, gpus_per_node=8, nvls=True)
    assert fsdp == pytest.approx((422_576_128, 2_298_612_736), rel=1e-12)
    # 64 GPUs of a 72-GPU NVLink domain in one group: at most 32 NVLS heads (NCCL_MAX_NVLS_ARITY)
    #   low 154,140,672 + 2 x 16 x 1 MiB x 32 = 154,140,672 + 1 GiB
    nvl72 = nccl_buffer_bytes(SCALAR, world=64, tp=1, cp=1, dp=64, pp=1, ep=1, gpus_per_node=72, nvls=True)
    assert nvl72[0] == pytest.approx(154_140_672 + 2**30, rel=1e-12)
    # array-safe: the same numbers on columns
    np = pytest.importorskip("numpy")
    cols = nccl_buffer_bytes(np, world=np.array([8.0, 8.0]), tp=np.array([2.0, 1.0]), cp=np.ones(2),
                             dp=np.array([4.0, 8.0]), pp=np.ones(2), ep=np.ones(2), gpus_per_node=8, nvls=True)
    assert cols[0].tolist() == pytest.approx([865_075_200, 422_576_128], rel=1e-12)
    assert cols[1].tolist() == pytest.approx([4_335_919_104, 2_298_612_736], rel=1e-12)


def test_device_range_carries_the_layouts_nccl_buffers():
    # 8 GPUs of FSDP on H100 (NVLS): reserved 0-15% over the peak allocated, + the CUDA context 0.5-1 GiB,
    # + NCCL 422,576,128 - 2,298,612,736 bytes (the test above)
    m = memory_per_gpu(SPEC, Layout(dp=8, zero=3, global_batch=8), seq=S, capacity_bytes=80e9, gpus_per_node=8, nvls=True)
    GiB = 2**30
    assert m.device_bytes[0] == pytest.approx(m.total_bytes + 0.5 * GiB + 422_576_128, rel=1e-12)
    assert m.device_bytes[1] == pytest.approx(1.15 * m.total_bytes + 1.0 * GiB + 2_298_612_736, rel=1e-12)
    assert nvls_capable("h100-sxm") and nvls_capable("b200") and not nvls_capable("a100-sxm4-80gb")


def test_megatrons_two_further_groups_by_hand():
    # Megatron-Core on TP 2 x DP 4, 8 H100: the groups above (low 865,075,200, high 4,335,919,104) and
    #   a second DP group of 4 (stride 2, 4 local, NVLS): low 154,140,672 + 2 x 16 x 1 MiB x 4 = 288,358,400,
    #     high 688e6 + 2 x 16 x 6 MiB x 4 = 1,493,306,368;
    #   the model-parallel group of t p = 2 ranks (2 local: no NVLS): low 154,140,672, high 544e6
    #   -> low 1,307,574,272, high 6,373,225,472
    kw = dict(world=8, tp=2, cp=1, dp=4, pp=1, ep=1, gpus_per_node=8, nvls=True)
    got = nccl_buffer_bytes(SCALAR, **kw, extra_groups=("dp", "mp"))
    assert got == pytest.approx((1_307_574_272, 6_373_225_472), rel=1e-12)
    # the model-parallel group of TP 2 x PP 4 on one node (d = 1): 2 x min(4, 8 / 2) = 8 local -> NVLS on 8
    mp = nccl_buffer_bytes(SCALAR, world=8, tp=2, cp=1, dp=1, pp=4, ep=1, gpus_per_node=8, nvls=True,
                           extra_groups=("mp",))
    base = nccl_buffer_bytes(SCALAR, world=8, tp=2, cp=1, dp=1, pp=4, ep=1, gpus_per_node=8, nvls=True)
    assert mp[0] - base[0] == pytest.approx(154_140_672 + 2 * 16 * MiB * 8, rel=1e-12)
    assert mp[1] - base[1] == pytest.approx(688e6 + 2 * 16 * 6 * MiB * 8, rel=1e-12)
    with pytest.raises(ValueError):
        nccl_buffer_bytes(SCALAR, **kw, extra_groups=("amax",))


def test_megatrons_default_group_where_tp_spans_every_rank_by_hand():
    # Megatron-Core on TP 8 of 8 A100 (no NVLS): the TP group, the model-parallel group of t p = 8 and the default
    # group (pretrain's start-time all-reduce, the timers' all-gather) are three communicators of 8 ranks; the
    # data-parallel groups have one rank (none). B_conn = 4,194,304 + 4,915,200 + 524,288 = 9,633,792;
    # low 3 x 16 x 9,633,792 = 462,422,016, high 3 x 688e6 = 2.064e9 (without ``world``: two of them)
    kw = dict(world=8, tp=8, cp=1, dp=1, pp=1, ep=1, gpus_per_node=8, nvls=False)
    assert nccl_buffer_bytes(SCALAR, **kw, extra_groups=("dp", "mp", "world")) == pytest.approx(
        (462_422_016, 2.064e9), rel=1e-12)
    assert nccl_buffer_bytes(SCALAR, **kw, extra_groups=("dp", "mp")) == pytest.approx((308_281_344, 1.376e9),
                                                                                        rel=1e-12)
    # TP 2 x DP 4: no dimension spans the 8 ranks, so the default group is already counted once: ``world`` adds
    # nothing (the groups of the test above: low 1,307,574,272, high 6,373,225,472)
    tp2 = dict(world=8, tp=2, cp=1, dp=4, pp=1, ep=1, gpus_per_node=8, nvls=True)
    assert nccl_buffer_bytes(SCALAR, **tp2, extra_groups=("dp", "mp", "world")) == pytest.approx(
        (1_307_574_272, 6_373_225_472), rel=1e-12)
    # the same two layouts as columns (``commcost search``)
    np = pytest.importorskip("numpy")
    cols = nccl_buffer_bytes(np, world=np.array([8.0, 8.0]), tp=np.array([8.0, 2.0]), cp=np.ones(2),
                             dp=np.array([1.0, 4.0]), pp=np.ones(2), ep=np.ones(2), gpus_per_node=8, nvls=False,
                             extra_groups=("dp", "mp", "world"))
    assert cols[0][0] == pytest.approx(462_422_016, rel=1e-12)
    assert cols[0][1] == pytest.approx(nccl_buffer_bytes(SCALAR, **{**tp2, "nvls": False},
                                                         extra_groups=("dp", "mp"))[0], rel=1e-12)


def test_pipeline_group_across_nodes_holds_the_shared_send_receive_pools_by_hand():
    # the pipeline group only sends and receives: with every peer on another node (n_loc = 1) NCCL sets up no
    # per-protocol buffers for it, only the shared pools, one a direction:
    # 2 x 16 channels x 16 steps x 128 KiB = 2 x 16 x 16 x 131,072 = 67,108,864 (64 MiB) instead of 154,140,672
    assert NCCL_P2P_NET_BYTES == 67_108_864
    # TP 8 x PP 2 on 2 nodes of 8 (no NVLS): world (16 ranks, 8 on the node), TP (8, all local), PP (2, stride 8:
    # one a node). low: 2 x 154,140,672 + 67,108,864 = 375,390,208; high: 688 MB + 688 MB + 544 MB = 1,920,000,000
    lo, hi = nccl_buffer_bytes(SCALAR, world=16, tp=8, cp=1, dp=1, pp=2, ep=1, gpus_per_node=8, nvls=False)
    assert (lo, hi) == (375_390_208, 1_920_000_000)
    # TP 2 x PP 4 on one node: the pipeline's peers share the node (n_loc = min(4, 8/2) = 4): P2P transport, whose
    # send/receive connections carry every protocol: 16 x 9,633,792 = 154,140,672 as any group; world (8 ranks) the
    # third: 3 x 154,140,672 = 462,422,016
    lo, _ = nccl_buffer_bytes(SCALAR, world=8, tp=2, cp=1, dp=1, pp=4, ep=1, gpus_per_node=8, nvls=False)
    assert lo == 462_422_016
