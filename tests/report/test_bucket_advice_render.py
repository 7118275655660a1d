"""Direct tests of ``report/bucket_advice.py``: the one line of bucket advice and its JSON, by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from commcost.comm.link import Link
from commcost.comm.model import FlatLinkModel
from commcost.report.bucket_advice import PER_TENSOR_NOTE, bucket_advice_to_dict, render_bucket_advice
from commcost.step.bucket_advice import STREAM_PER_TENSOR, STREAM_UNIFORM, recommend_buckets
from commcost.step.timeline import TimelineInputs
from conftest import numbers_without_a_unit, strict_round_trip

MiB = 2**20
REAL = recommend_buckets(TimelineInputs(gpus=8, comm=FlatLinkModel(link=Link(bandwidth_bytes_per_s=50e9,
                                                                             latency_s=10e-6)),
                                        step_s=0.2, params=1e9))
# a recommendation with numbers chosen by hand (the rendering reads only these fields)
A = replace(REAL, good_bytes=(32 * MiB, 47_448_064, 64 * MiB), recommended_bytes=64 * MiB, first_bucket_bytes=64 * MiB,
            min_exposed_s=1.89e-3, exposed_s=1.9e-3, default_exposed_s=3e-3, caps_tried=12, stream=STREAM_UNIFORM,
            rule="the rule")


def test_a_few_good_caps_are_listed():
    # 47,448,064 B / 2**20 = 45.25 MiB
    assert render_bucket_advice(A) == ("simulated: caps exposing within max(5%, 50 us) of the least (1.89 ms): "
                                       "32 MiB, 45.25 MiB, 64 MiB; recommended 64 MiB (the rule)")


def test_many_good_caps_are_a_range():
    a = replace(A, good_bytes=tuple(k * MiB for k in (1, 2, 4, 8, 16)), recommended_bytes=16 * MiB)
    assert render_bucket_advice(a) == ("simulated: caps exposing within max(5%, 50 us) of the least (1.89 ms): "
                                       "5 caps from 1 MiB to 16 MiB; recommended 16 MiB (the rule)")


def test_when_the_default_wins_the_line_says_so():
    a = replace(A, good_bytes=(), recommended_bytes=25 * MiB, first_bucket_bytes=MiB)
    assert render_bucket_advice(a) == ("simulated: none of the 12 caps tried exposes less than PyTorch's default "
                                       "(3.00 ms); recommended 25 MiB with a 1 MiB first bucket, the default (the rule)")


def test_the_per_tensor_stream_is_named():
    assert render_bucket_advice(replace(A, stream=STREAM_PER_TENSOR)).endswith("; " + PER_TENSOR_NOTE)


def test_dict_is_strict_with_units():
    d = strict_round_trip(bucket_advice_to_dict(A))
    assert numbers_without_a_unit(d) == []
    assert d["good_bytes"] == [32 * MiB, 47_448_064, 64 * MiB] and d["recommended_bytes"] == 64 * MiB
    assert d["min_exposed_s"] == pytest.approx(1.89e-3) and d["caps_tried"] == 12
    assert numbers_without_a_unit(bucket_advice_to_dict(REAL)) == []
