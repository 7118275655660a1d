"""``parallel/layout.py``: a pipeline split that counts the embedding and the head as a layer each
(``Layout.split_counts_ends``: Megatron-Core's account_for_{embedding,loss}_in_pipeline_split, Megatron-DeepSpeed's
'type:transformer|embedding', the Llama 3 paper's balanced pipeline)."""

from __future__ import annotations

import numpy as np
import pytest

from commcost.core.errors import InputError
from commcost.core.xp import SCALAR
from commcost.parallel.layout import Layout, check_layout, split_slots, stage_end_shares, stage_layers


def test_slots_and_a_middle_stage_by_hand():
    # BLOOM: 70 blocks + embedding + head = 72 slots over 12 stages: 6 a stage (the README's [embed | 5 blocks],
    # 6 blocks x 10, [5 blocks | embed])
    bloom = Layout(dp=8, tp=4, pp=12, global_batch=2048, split_counts_ends=True)
    assert split_slots(70, bloom) == 72 and stage_layers(70, bloom) == 6.0
    # Llama 3 405B: 126 + 2 = 128 slots = 16 stages x 8 chunks of one
    llama = Layout(dp=64, tp=8, pp=16, vp=8, global_batch=2048, split_counts_ends=True)
    assert split_slots(126, llama) == 128 and stage_layers(126, llama) == 8.0
    # 30 layers on 4 stages: 32 slots, 8 a middle stage; the plain split needs --uneven-pipeline (ceil(30/4) = 8)
    four = Layout(dp=1, pp=4, global_batch=4, split_counts_ends=True)
    assert stage_layers(30, four) == 8.0
    # two stages: 32 + 2 = 34 slots, 17 each, 16 layers and an end on each
    assert stage_layers(32, Layout(dp=1, pp=2, global_batch=2, split_counts_ends=True)) == 16.0
    assert split_slots(30, Layout(dp=1, pp=4, global_batch=4)) == 30


def test_the_slowest_stage_by_hand():
    # the last stage holds n - 1 layers and the head, a middle one n layers: with a layer of 2 s and a head of 3 s
    # the last stage (n - 1) 2 + 3 is the slower, so one layer fewer and the head: (0, 1)
    assert stage_end_shares(SCALAR, counted=True, pp=4, layer_s=2.0, head_s=3.0) == (0.0, 1.0)
    # a head of 1 s: the middle stage n x 2 is the slower, every layer and no head: (1, 0)
    assert stage_end_shares(SCALAR, counted=True, pp=4, layer_s=2.0, head_s=1.0) == (1.0, 0.0)
    # two stages have no middle one: stage_layers already holds n - 1, the last stage's layers and the head
    assert stage_end_shares(SCALAR, counted=True, pp=2, layer_s=2.0, head_s=1.0) == (1.0, 1.0)
    # a plain split: the last stage holds n layers and the head
    assert stage_end_shares(SCALAR, counted=False, pp=4, layer_s=2.0, head_s=3.0) == (1.0, 1.0)
    k, h = stage_end_shares(np, counted=np.array([True, True, False, True]), pp=np.array([4, 4, 4, 2]),
                            layer_s=np.array([2.0, 2.0, 2.0, 2.0]), head_s=np.array([3.0, 1.0, 3.0, 1.0]))
    assert k.tolist() == [0.0, 1.0, 1.0, 1.0] and h.tolist() == [1.0, 0.0, 1.0, 1.0]


def test_the_split_is_checked_on_its_slots():
    # 70 layers do not divide by 12 stages, 72 slots do
    with pytest.raises(InputError, match=r"layers \(70\) not divisible by pp x vp = 12 x 1 = 12"):
        check_layout(Layout(dp=8, tp=4, pp=12, global_batch=2048), gpus=384, layers=70, heads=112, kv_heads=112,
                     seq=2048)
    check_layout(Layout(dp=8, tp=4, pp=12, global_batch=2048, split_counts_ends=True), gpus=384, layers=70,
                 heads=112, kv_heads=112, seq=2048)
    # 72 slots on 5 stages: 72 = 14 x 5 + 2
    with pytest.raises(InputError, match=r"layers \+ embedding \+ head \(72\) not divisible by pp x vp = 5 x 1 = 5"):
        check_layout(Layout(dp=1, pp=5, global_batch=5, split_counts_ends=True), gpus=5, layers=70, heads=8,
                     kv_heads=8, seq=2048)
    with pytest.raises(InputError, match="needs pp > 1"):
        Layout(dp=8, global_batch=8, split_counts_ends=True)
