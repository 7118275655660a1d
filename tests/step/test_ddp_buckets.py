"""DDP's bucket packing, emulated: hand-worked cases of the rules in commcost.step.ddp_buckets."""

import pytest
from hypothesis import given, strategies as st

from commcost.step.ddp_buckets import (
    DdpBucketCaps, assign_buckets_by_size, ddp_bucket_caps, initial_buckets, rebuilt_buckets,
)
from commcost.core.errors import InputError


def test_default_caps_are_25_mib_with_a_1_mib_first_bucket():
    caps = ddp_bucket_caps(None)
    assert caps.bucket_cap_bytes == 25 * 1024 * 1024 == 26_214_400
    assert caps.first_bucket_cap_bytes == 1024 * 1024
    assert caps.limits == (1_048_576, 26_214_400)


def test_explicit_cap_makes_the_first_bucket_as_large_as_the_rest():
    # torch 2.13 _BucketCapacityConfig.create: first = _DEFAULT_FIRST_BUCKET_BYTES only when bucket_cap_mb is None
    caps = ddp_bucket_caps(25)
    assert caps.bucket_cap_bytes == caps.first_bucket_cap_bytes == 26_214_400
    assert caps.limits == (26_214_400,)
    # int(0.5 * 2**20) = 524288
    assert ddp_bucket_caps(0.5).bucket_cap_bytes == 524_288
    assert ddp_bucket_caps(8, first_bucket_bytes=1000).limits == (1000, 8 * 2**20)


def test_bucket_closes_on_the_tensor_that_reaches_the_limit_then_advances_the_limit():
    # sizes 4,4,4,4,4 with limits [5, 8]:
    # 4 (<5) ; +4 = 8 >= 5 -> close [0,1] at limit 5, next limit 8
    # 4 (<8) ; +4 = 8 >= 8 -> close [2,3] at 8 ; 4 left open -> [4] with limit 8
    buckets, limits = assign_buckets_by_size([4, 4, 4, 4, 4], [5, 8])
    assert buckets == ((0, 1), (2, 3), (4,))
    assert limits == (5, 8, 8)


def test_a_tensor_larger_than_the_cap_gets_a_bucket_of_its_own():
    # 100 >= 10 closes at once: tensors are never split
    buckets, _ = assign_buckets_by_size([3, 100, 3, 3, 3, 3], [10])
    assert buckets == ((0, 1), (2, 3, 4, 5))


def test_each_dtype_has_its_own_bucket_and_results_are_sorted_by_smallest_index():
    # a: 10 -> close [0]; b: 1, 1 (open); a: 10 -> close [3]; open b [1,2] appended last,
    # then sorted by min index: [0], [1,2], [3]
    buckets, _ = assign_buckets_by_size([10, 1, 1, 10], [5], keys=["a", "b", "b", "a"])
    assert buckets == ((0,), (1, 2), (3,))


def test_explicit_order_is_walked_and_not_sorted():
    # order 3,2,1,0 with sizes 1 each and limit 2: [3,2], [1,0]
    buckets, _ = assign_buckets_by_size([1, 1, 1, 1], [2], order=[3, 2, 1, 0])
    assert buckets == ((3, 2), (1, 0))


def test_sparse_tensors_get_singleton_buckets_with_no_limit():
    buckets, limits = assign_buckets_by_size([1, 1, 1], [10], sparse=[False, True, False])
    assert buckets == ((0, 2), (1,))
    assert limits == (10, 0)


def test_iteration_zero_is_one_bucket_by_default():
    # find_unused_parameters=False -> limits [sys.maxsize]: a single bucket
    caps = ddp_bucket_caps(None)
    assert initial_buckets([2**20] * 5, caps) == ((0, 1, 2, 3, 4),)


def test_iteration_zero_with_find_unused_puts_the_small_bucket_last():
    # module order, limits [1 MiB, 25 MiB]: [0] (1 MiB reached), [1..4] (4 MiB, open);
    # DDP reverses the list: the first-defined parameter is reduced last
    caps = ddp_bucket_caps(None)
    assert initial_buckets([2**20] * 5, caps, find_unused_parameters=True) == ((1, 2, 3, 4), (0,))


def test_rebuild_puts_the_small_bucket_at_the_start_of_backward():
    # ready order 4,3,2,1,0 (reverse definition); 1 MiB each; limits [1 MiB, 2 MiB]:
    # [4] (1 MiB >= 1 MiB), [3,2] (2 MiB), [1,0]
    caps = DdpBucketCaps(bucket_cap_bytes=2 * 2**20, first_bucket_cap_bytes=2**20)
    assert rebuilt_buckets([2**20] * 5, [4, 3, 2, 1, 0], caps) == ((4,), (3, 2), (1, 0))


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=60),
       st.lists(st.integers(1, 20_000), min_size=1, max_size=3))
def test_every_tensor_lands_in_exactly_one_bucket_and_only_the_last_per_key_is_under_its_limit(sizes, limits):
    buckets, lims = assign_buckets_by_size(sizes, limits)
    flat = [i for b in buckets for i in b]
    assert sorted(flat) == list(range(len(sizes)))
    # one key: every closed bucket reached its limit, only the final (open) one may not
    for b, lim in zip(buckets[:-1], lims[:-1]):
        assert sum(sizes[i] for i in b) >= lim
        # and it would not have closed one tensor earlier
        assert sum(sizes[i] for i in b[:-1]) < lim


@pytest.mark.parametrize("bad", [dict(tensor_bytes=[], limits=[1]), dict(tensor_bytes=[1], limits=[]),
                                 dict(tensor_bytes=[1], limits=[0]), dict(tensor_bytes=[-1], limits=[1])])
def test_bad_input_raises_input_error(bad):
    with pytest.raises(InputError):
        assign_buckets_by_size(bad["tensor_bytes"], bad["limits"])


def test_bad_caps_raise_input_error():
    with pytest.raises(InputError, match="bucket_cap_mb"):
        ddp_bucket_caps(0)
    with pytest.raises(InputError, match="first_bucket_cap_bytes"):
        DdpBucketCaps(bucket_cap_bytes=10, first_bucket_cap_bytes=0)
