"""How PyTorch DDP groups gradients into buckets (torch 2.13), emulated in pure Python.

Sources read: the installed torch 2.13.0 ``torch/nn/parallel/distributed.py``
(``_BucketCapacityConfig.create`` and ``.compute_bucket_size_limits``,
``DistributedDataParallel._ddp_init_helper``, the ``_rebuild_buckets`` call in
``forward``), and the C++ reducer ``torch/csrc/distributed/c10d/reducer.cpp``
(``compute_bucket_assignment_by_size``, ``Reducer::rebuild_buckets``) and
``reducer.hpp`` (``should_rebuild_buckets``: "We only rebuild buckets once after
the first iteration and never rebuild them if find_unused_parameters_";
buckets "are reduced in a predetermined order that is identical across
processes") of pytorch/pytorch, read through the project's
code-search index since the wheel ships no C++ source. The C++ behaviour is
confirmed against the wheel itself: ``dist._compute_bucket_assignment_by_size``
on real modules, and a single-process gloo ``DistributedDataParallel`` whose
logging data (``bucket_sizes``, ``rebuilt_per_bucket_param_indices``) shows
iteration 0 and the rebuild (``tests/step/test_ddp_buckets_torch.py``).

1. **Caps.** ``_BucketCapacityConfig.create``: ``bucket_cap_mb`` is in MiB
   (``int(bucket_cap_mb * 1024 * 1024)`` bytes), default 25 when it is ``None``.
   The first-bucket cap is ``dist._DEFAULT_FIRST_BUCKET_BYTES`` (1 MiB) **only
   when ``bucket_cap_mb`` is left at ``None``**; an explicit ``bucket_cap_mb``
   (even 25) makes the first bucket as large as the others. :func:`ddp_bucket_caps`.
2. **The packing rule.** ``compute_bucket_assignment_by_size`` (C++, bound as
   ``dist._compute_bucket_assignment_by_size``) walks the tensors in order, one
   open bucket per (dtype, device); it appends a tensor, adds its bytes, and
   closes the bucket as soon as ``size >= limit`` -- so a bucket overshoots its
   cap by up to one tensor, and a tensor larger than the cap gets a bucket of its
   own (tensors are never split). Each (dtype, device) walks the limit list
   ``[first, cap]`` on its own, staying at the last entry. Sparse-gradient
   tensors get singleton buckets. The still-open buckets are appended at the
   end; when no explicit order (``tensor_indices``) is given the result is sorted
   by each bucket's smallest tensor index. :func:`assign_buckets_by_size`.
3. **Iteration 0.** ``_ddp_init_helper`` builds the initial buckets over
   ``module.parameters()`` order (deduplicated, ``requires_grad`` only) and
   *reverses* the bucket list, assuming gradients arrive in reverse definition
   order. With the defaults (``find_unused_parameters=False``) or
   ``static_graph=True`` the limit list is ``[sys.maxsize]``: **one bucket**, so
   the first iteration has no overlap at all. With ``find_unused_parameters=True``
   it is ``[first, cap]``: the small first bucket holds the *first-defined*
   parameters and, after the reversal, is reduced **last** -- it lands at the end
   of the backward pass. :func:`initial_buckets`.
4. **Rebuild.** ``Reducer::rebuild_buckets`` runs once, in the forward pass of
   the next iteration, when ``static_graph || !find_unused_parameters``: it packs
   the parameters *in the order their gradients became ready* in the previous
   backward with limits ``[first_bucket_bytes_cap_, bucket_bytes_cap_]`` and no
   sorting. The small first bucket now holds the gradients ready first (the
   output end of the model) and lands at the **start** of backward, so
   communication begins early. (``DDP_SET_LAST_BUCKET_CAP=1`` reverses this; not
   modelled.) With ``find_unused_parameters=True`` (and no static graph) the
   buckets are never rebuilt. :func:`rebuilt_buckets`.

The steady state the timeline simulates is therefore (4): buckets in
gradient-ready order, the first capped at ``first``, the rest at ``cap``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from collections.abc import Hashable, Sequence

import math

from commcost.core.errors import InputError
from commcost.core.units import MiB

__all__ = [
    "DEFAULT_BUCKET_CAP_MIB", "DEFAULT_FIRST_BUCKET_BYTES", "DdpBucketCaps",
    "ddp_bucket_caps", "assign_buckets_by_size", "initial_buckets", "rebuilt_buckets",
]

DEFAULT_BUCKET_CAP_MIB = 25
"""``_DEFAULT_BUCKET_CAP_MB`` in torch/nn/parallel/distributed.py (MiB despite the name)."""
DEFAULT_FIRST_BUCKET_BYTES = 1024 * 1024
"""``torch.distributed._DEFAULT_FIRST_BUCKET_BYTES`` (1 MiB)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DdpBucketCaps:
    """The two caps DDP packs with (``_BucketCapacityConfig`` in torch 2.13)."""

    bucket_cap_bytes: int
    """``bucket_bytes_cap``: every bucket after the first, bytes."""
    first_bucket_cap_bytes: int
    """``first_bucket_bytes_cap``: the first bucket of the rebuilt assignment, bytes."""

    def __post_init__(self) -> None:
        for name, value in (("bucket_cap_bytes", self.bucket_cap_bytes),
                            ("first_bucket_cap_bytes", self.first_bucket_cap_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{name} must be an integer >= 1 byte, got {value!r}")

    @property
    def limits(self) -> tuple[int, ...]:
        """The limit list DDP passes: ``[first, cap]``, or ``[cap]`` when they are equal."""
        if self.first_bucket_cap_bytes < self.bucket_cap_bytes:
            return (self.first_bucket_cap_bytes, self.bucket_cap_bytes)
        return (self.bucket_cap_bytes,)


def ddp_bucket_caps(bucket_cap_mb: float | None = None, *,
                    first_bucket_bytes: int | None = None) -> DdpBucketCaps:
    """The caps ``DistributedDataParallel(bucket_cap_mb=...)`` uses (see point 1).

    ``bucket_cap_mb=None`` gives 25 MiB with a 1 MiB first bucket; an explicit
    value gives ``int(bucket_cap_mb * 2**20)`` for both. ``first_bucket_bytes``
    overrides the first cap (what the C++ reducer's ``first_bucket_bytes_cap``
    argument would be), for what-if questions.
    """
    if bucket_cap_mb is None:
        cap = DEFAULT_BUCKET_CAP_MIB * int(MiB)
        first = DEFAULT_FIRST_BUCKET_BYTES
    else:
        if isinstance(bucket_cap_mb, bool) or not isinstance(bucket_cap_mb, (int, float)):
            raise TypeError(f"bucket_cap_mb must be a number of MiB, got {type(bucket_cap_mb).__name__}")
        if not 0 < bucket_cap_mb <= 2.0**40:
            raise InputError(f"bucket_cap_mb must be > 0 and at most 2**40 MiB, got {bucket_cap_mb!r}")
        cap = int(bucket_cap_mb * MiB)
        if cap < 1:
            raise InputError(f"bucket_cap_mb = {bucket_cap_mb:g} MiB is under one byte")
        first = cap
    if first_bucket_bytes is not None:
        if isinstance(first_bucket_bytes, bool) or not isinstance(first_bucket_bytes, int):
            raise TypeError(f"first_bucket_bytes must be an int, got {type(first_bucket_bytes).__name__}")
        first = first_bucket_bytes
    return DdpBucketCaps(bucket_cap_bytes=cap, first_bucket_cap_bytes=first)


def _check_sizes(tensor_bytes: Sequence[int], limits: Sequence[int]) -> None:
    """:func:`assign_buckets_by_size`'s sizes: at least one tensor of 0 to 2**60 bytes, at least one limit,
    each a finite number of bytes >= 1."""
    if len(tensor_bytes) == 0:
        raise InputError("no tensors to bucket")
    if not limits:
        raise InputError("bucket size limits must not be empty")
    for lim in limits:
        if isinstance(lim, bool) or not isinstance(lim, (int, float)):
            raise TypeError(f"bucket size limit must be a number of bytes, got {type(lim).__name__}")
        if not 1 <= lim < math.inf:  # NaN fails too; sys.maxsize is torch's "no limit"
            raise InputError(f"bucket size limit must be a finite number of bytes >= 1, got {lim!r}")
    for i, b in enumerate(tensor_bytes):
        if isinstance(b, bool) or not isinstance(b, (int, float)):
            raise TypeError(f"tensor {i}'s size must be a number of bytes, got {type(b).__name__}")
        if not 0 <= b <= 2.0**60:
            raise InputError(f"tensor {i} has size {b!r} bytes (must be between 0 and 2**60)")


def assign_buckets_by_size(
    tensor_bytes: Sequence[int], limits: Sequence[int], *,
    keys: Sequence[Hashable] | None = None,
    sparse: Sequence[bool] | None = None,
    order: Sequence[int] | None = None,
) -> tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """Emulate ``dist._compute_bucket_assignment_by_size`` (see point 2).

    ``tensor_bytes[i]`` is ``numel * element_size`` of tensor ``i``; ``keys[i]``
    its (dtype, device) group (default: one group); ``sparse[i]`` whether it
    expects a sparse gradient; ``order`` the walk order (``tensor_indices``;
    default ``0..n-1`` followed by the sort by smallest index). Returns
    ``(buckets, size_limits)``: tensor indices per bucket and the limit that was
    current when each bucket was filled (0 for sparse singletons), like torch.
    """
    n = len(tensor_bytes)
    _check_sizes(tensor_bytes, limits)
    keys = keys if keys is not None else (None,) * n
    if len(keys) != n or (sparse is not None and len(sparse) != n):
        raise InputError(f"keys/sparse must have one entry per tensor ({n})")
    walk = range(n) if order is None else order
    if order is not None and sorted(order) != list(range(n)):
        raise InputError("order must be a permutation of the tensor indices")
    result: list[tuple[list[int], int]] = []
    open_indices: dict[Hashable, list[int]] = {}
    open_bytes: dict[Hashable, int] = {}
    open_limit: dict[Hashable, int] = {}
    limit_pos: dict[Hashable, int] = {}
    last = len(limits) - 1
    for index in walk:
        if sparse is not None and sparse[index]:
            result.append(([index], 0))
            continue
        key = keys[index]
        if key not in open_indices:       # dict insertion order stands in for the
            open_indices[key] = []        # C++ unordered_map's; only matters with
            open_bytes[key] = 0           # several keys left open at the end
        pos = limit_pos.setdefault(key, 0)
        open_indices[key].append(index)
        open_bytes[key] += tensor_bytes[index]
        open_limit[key] = limits[pos]
        if open_bytes[key] >= limits[pos]:
            result.append((open_indices[key], limits[pos]))
            open_indices[key], open_bytes[key] = [], 0
            limit_pos[key] = min(pos + 1, last)
    for key, indices in open_indices.items():
        if indices:
            result.append((indices, open_limit[key]))
    if order is None:
        result.sort(key=lambda item: min(item[0]))
    return tuple(tuple(b) for b, _ in result), tuple(lim for _, lim in result)


def initial_buckets(param_bytes: Sequence[int], caps: DdpBucketCaps, *,
                    find_unused_parameters: bool = False, static_graph: bool = False,
                    keys: Sequence[Hashable] | None = None) -> tuple[tuple[int, ...], ...]:
    """The buckets of iteration 0, in the order the reducer reduces them (point 3).

    ``param_bytes`` in ``module.parameters()`` order (deduplicated).
    """
    if static_graph or not find_unused_parameters:
        limits: tuple[int, ...] = (sys.maxsize,)
    else:
        limits = caps.limits
    buckets, _ = assign_buckets_by_size(param_bytes, limits, keys=keys)
    return tuple(reversed(buckets))


def rebuilt_buckets(param_bytes: Sequence[int], ready_order: Sequence[int], caps: DdpBucketCaps, *,
                    keys: Sequence[Hashable] | None = None) -> tuple[tuple[int, ...], ...]:
    """The buckets after the rebuild, in reduction order (point 4).

    ``ready_order``: parameter indices in the order their gradients became ready
    in the previous backward pass. The C++ reducer always passes both caps,
    ``[first_bucket_bytes_cap_, bucket_bytes_cap_]``.
    """
    limits = (caps.first_bucket_cap_bytes, caps.bucket_cap_bytes)
    buckets, _ = assign_buckets_by_size(param_bytes, limits, keys=keys, order=ready_order)
    return buckets
