"""Freed array memory kept for reuse while a search runs (:func:`kept_heap`), instead of handed back to the
operating system and faulted in again on the next allocation.

A search evaluates its grid as numpy columns of up to ``2**18`` float64 values (2 MiB each) and makes and
drops hundreds of such temporaries. glibc's ``malloc`` serves a block above its mmap threshold (128 KiB at
start, raised to the largest block freed so far, at most 32 MiB) with a fresh ``mmap`` and trims the top of
its heap once more than twice that threshold is free (``mallopt(3)``: ``M_MMAP_THRESHOLD``,
``M_TRIM_THRESHOLD``; glibc ``malloc/malloc.c``, "dynamic mmap threshold"): each fresh page costs a
minor page fault and the kernel's zeroing. Measured on the MoE case of ``benchmarks/search_speed.py``
(Mixtral-8x7B on 64 H100, 725,724 configurations, a fresh process on one core): 67,000 minor faults and
0.10-0.18 of 0.45 CPU s in the kernel; with both thresholds held high, 37,000 faults and 0.06 s.

Only glibc (Linux) has these knobs; elsewhere :func:`kept_heap` does nothing. On leaving it the trim
threshold goes back to glibc's default and ``malloc_trim(0)`` hands the kept memory back, so a process that
searched holds no more than before (the mmap threshold stays at its start value, 128 KiB: glibc has no call
that restores the dynamic one). Standard library only (``ctypes``, which numpy imports anyway).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["kept_heap", "MMAP_THRESHOLD_BYTES", "TRIM_THRESHOLD_BYTES"]

_M_TRIM_THRESHOLD = -1
"""glibc ``malloc.h``: ``#define M_TRIM_THRESHOLD -1``."""
_M_MMAP_THRESHOLD = -3
"""glibc ``malloc.h``: ``#define M_MMAP_THRESHOLD -3``."""
_DEFAULT_THRESHOLD_BYTES = 128 * 1024
"""glibc's ``DEFAULT_MMAP_THRESHOLD_MIN`` and ``DEFAULT_TRIM_THRESHOLD``: 128 KiB."""

MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
"""Blocks below this come from the heap while a search runs: glibc's ``DEFAULT_MMAP_THRESHOLD_MAX`` on 64-bit,
the ceiling its dynamic threshold would reach, set from the start."""
TRIM_THRESHOLD_BYTES = 256 * 1024 * 1024
"""Free memory at the heap's top kept while a search runs (the MoE case's faults fell from 67,000 to 50,000 at
64 MiB and to 37,000 at 256 MiB); handed back on leaving :func:`kept_heap`."""


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (``mallopt`` and ``malloc_trim`` present), else None."""
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
        libc = ctypes.CDLL(None)
        return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None
    except (ValueError, OSError, AttributeError):
        return None


@contextmanager
def kept_heap() -> Iterator[None]:
    """Within: freed blocks below :data:`MMAP_THRESHOLD_BYTES` stay in the heap, up to
    :data:`TRIM_THRESHOLD_BYTES` free at its top (module docstring); on leaving, the trim threshold is glibc's
    default again and the kept memory is handed back. Usable as a decorator. A no-op without glibc."""
    libc = _glibc()
    if libc is None:
        yield
        return
    libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    try:
        yield
    finally:
        libc.mallopt(_M_MMAP_THRESHOLD, _DEFAULT_THRESHOLD_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, _DEFAULT_THRESHOLD_BYTES)
        libc.malloc_trim(0)
