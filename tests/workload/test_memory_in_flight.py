"""``workload/memory.py``: the micro-batches in flight on each of the first pipeline ranks under Megatron-Core's
schedules, where the split counts the embedding as a layer (the first rank's chunk 0 holds it instead of a layer),
and the stage whose memory a plan reports."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.parallel.layout import Layout
from commcost.workload.memory import (embedding_chunks_in_flight, first_ranks_in_flight, in_flight_chunks,
                                      in_flight_layers, memory_per_gpu, memory_stage_params, params_per_gpu)
from commcost.workload.transformer import model_spec


def test_in_flight_chunks_by_rank_by_hand():
    # interleaved, p = 16, v = 8, m = 32: rank 0 min(256, 2 x 15 + 7 x 16 + 1) = 143; rank 1 2 x 14 + 112 + 1 = 141
    assert in_flight_chunks(pp=16, vp=8, micro_batches=32) == 143
    assert in_flight_chunks(pp=16, vp=8, micro_batches=32, rank=1) == 141
    # 1F1B, p = 16: rank 0 min(32, 16) = 16, rank 1 min(32, 15) = 15; with m = 4 both hold all 4
    assert in_flight_chunks(pp=16, vp=1, micro_batches=32) == 16
    assert in_flight_chunks(pp=16, vp=1, micro_batches=32, rank=1) == 15
    assert in_flight_chunks(pp=16, vp=1, micro_batches=4, rank=1) == 4


def test_embedding_chunks_in_flight_by_hand():
    # 143 forwards on the first rank, p = 16, v = 8: chunk 0 for micro-batches 0..15, chunks 1..7 (112), then
    # chunk 0 again for 15 more: 16 x floor(143/128) + min(143 mod 128, 16) = 16 + 15 = 31
    assert embedding_chunks_in_flight(143, 16, 8) == 31
    # 1F1B: every forward runs the one chunk: 16 x floor(16/16) + min(0, 16) = 16
    assert embedding_chunks_in_flight(16, 16, 1) == 16


def test_llama3_405b_split_ends_second_rank_is_fullest_by_hand():
    # 126 layers + embedding + head = 128 slots over 16 x 8 chunks, one slot a chunk (k = 128/128 = 1):
    # rank 0: 143 chunks, 31 of them the embedding alone: 143 - 31 = 112 layers; rank 1: 141 x 1 = 141 layers
    kw = dict(layers=128, pp=16, vp=8, micro_batches=32)
    assert first_ranks_in_flight(**kw, split_counts_ends=True) == (112, 141)
    assert in_flight_layers(**kw, split_counts_ends=True) == 141
    # the plain count of the same slots: 143 chunks of one layer
    assert in_flight_layers(**kw) == 143


def test_split_ends_1f1b_by_hand():
    # v = 1, 126 + 2 = 128 slots on 16 stages, n = 8: rank 0 16 micro-batches x (8 - 1) = 112 (c_0 = 16 of 16 x 8),
    # rank 1 15 x 8 = 120: the second rank is fuller
    assert first_ranks_in_flight(layers=128, pp=16, vp=1, micro_batches=32, split_counts_ends=True) == (112, 120)
    # 62 + 2 = 64 slots on 4 stages, n = 16 > p: rank 0 4 x 15 = 60, rank 1 3 x 16 = 48: the first is fuller
    assert in_flight_layers(layers=64, pp=4, vp=1, micro_batches=8, split_counts_ends=True) == 60
    # two stages have no middle one: rank 1 holds the head (the last stage), so only rank 0 counts,
    # 30 + 2 = 32 slots, n = 16: 2 x (16 - 1) = 30
    assert first_ranks_in_flight(layers=32, pp=2, vp=1, micro_batches=8, split_counts_ends=True) == (30, 0)


def test_split_ends_first_rank_fuller_with_several_layers_a_chunk_by_hand():
    # 126 + 2 = 128 slots, p = 4, v = 8: k = 4 a chunk. Rank 0: min(256, 2 x 3 + 7 x 4 + 1) = 35 chunks,
    # c_0 = 4 x floor(35/32) + min(3, 4) = 7: 35 x 4 - 7 = 133; rank 1: 2 x 2 + 28 + 1 = 33 chunks x 4 = 132
    assert first_ranks_in_flight(layers=128, pp=4, vp=8, micro_batches=32, split_counts_ends=True) == (133, 132)


def _megatron_peaks(p: int, v: int, m: int, layers_of_chunk) -> list[float]:
    """Each pipeline rank's most layers in flight, stepping through Megatron-Core's order (warm-up forwards, then
    one forward and one backward at a time, then the cool-down; chunk of forward k: ``(k mod p v) // p``, of
    backward k: ``v - 1 - (k mod p v) // p``)."""
    peaks = []
    for r in range(p):
        warmup = min(m * v, 2 * (p - r - 1) + (v - 1) * p if v > 1 else p - r - 1)
        steps = [("f", k) for k in range(warmup)]
        for k in range(m * v - warmup):
            steps += [("f", warmup + k), ("b", k)]
        steps += [("b", k) for k in range(m * v - warmup, m * v)]
        held = peak = 0.0
        for kind, k in steps:
            c = (k % (p * v)) // p
            held += layers_of_chunk(r, c) if kind == "f" else -layers_of_chunk(r, v - 1 - c)
            peak = max(peak, held)
        peaks.append(peak)
    return peaks


@settings(max_examples=60, deadline=None)
@given(p=st.integers(2, 12), v=st.integers(1, 6), groups=st.integers(1, 4), k=st.integers(1, 3),
       split=st.booleans())
def test_in_flight_matches_a_step_through_the_schedule(p, v, groups, k, split):
    # k slots a chunk; with the split, rank 0's chunk 0 holds k - 1 layers (the embedding) and the last rank's last
    # chunk k - 1 (the head). The fullest of the first p - 1 ranks (the last rank is the head's stage, priced apart)
    m = groups * p

    def layers_of_chunk(r, c):
        return k - split * ((r == 0 and c == 0) + (r == p - 1 and c == v - 1))

    peaks = _megatron_peaks(p, v, m, layers_of_chunk)
    want = max(peaks[:max(1, p - 1)])
    assert in_flight_layers(layers=k * p * v, pp=p, vp=v, micro_batches=m, split_counts_ends=split) == want


def test_in_flight_is_array_safe():
    got = in_flight_layers(layers=np.array([128.0, 128.0]), pp=np.array([16.0, 16.0]), vp=np.array([8.0, 1.0]),
                           micro_batches=np.array([32.0, 32.0]), split_counts_ends=True)
    assert got.tolist() == [141.0, 120.0]   # the two cases above


def test_memory_stage_params_llama3_405b_by_hand():
    # a layer: Q and O 2 x 16384^2 = 536,870,912; K and V 2 x 16384 x 1024 = 33,554,432; MLP 3 x 16384 x 53248 =
    # 2,617,245,696; two norms 32,768: 3,187,703,808. The embedding (and the head) 128,256 x 16384 = 2,101,346,304
    spec = model_spec("llama3.1-405b")
    L = Layout(dp=64, tp=8, pp=16, vp=8, global_batch=2048, split_counts_ends=True, zero=2)
    # middle stage: 8 x 3,187,703,808 / 8 = 3,187,703,808; an end stage (7 x 3,187,703,808 + 2,101,346,304
    # + 16,384) / 8 = 3,051,911,168: the middle stage is the heavier
    assert memory_stage_params(spec, L) == (3_187_703_808, 0)
    # params_per_gpu (the step's communication) keeps n layers and an end: (25,501,630,464 + 2,101,362,688) / 8
    assert params_per_gpu(spec, L)[0] == 3_450_374_144
    # a plain split: the same as params_per_gpu
    plain = Layout(dp=64, tp=8, pp=18, vp=7, global_batch=2304, zero=2)
    assert memory_stage_params(spec, plain) == params_per_gpu(spec, plain)


def test_memory_reports_the_second_stage_for_llama3_405b():
    spec = model_spec("llama3.1-405b")
    L = Layout(dp=64, tp=8, pp=16, vp=8, global_batch=2048, split_counts_ends=True, zero=2, sequence_parallel=True)
    mem = memory_per_gpu(spec, L, seq=8192, capacity_bytes=85e9)
    assert (mem.stage, mem.in_flight_layers) == ("second", 141)
    plain = memory_per_gpu(spec, Layout(dp=64, tp=8, pp=18, vp=7, global_batch=2304, zero=2,
                                        sequence_parallel=True), seq=8192, capacity_bytes=85e9)
    # 126 layers on 18 x 7 chunks of one, m = 2304/64 = 36: min(7 x 36, 2 x 17 + 6 x 18 + 1) = 143 on the first
    assert (plain.stage, plain.in_flight_layers) == ("first", 143)
    assert mem.activations_bytes == pytest.approx(plain.activations_bytes * 141 / 143)
