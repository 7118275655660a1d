"""core/heap.py: the glibc thresholds set inside kept_heap and restored on leaving, even on an exception."""

from __future__ import annotations

import pytest

import commcost.core.heap as heap


class FakeLibc:
    def __init__(self):
        self.calls = []

    def mallopt(self, option, value):
        self.calls.append(("mallopt", option, value))
        return 1

    def malloc_trim(self, pad):
        self.calls.append(("malloc_trim", pad))
        return 1


def test_thresholds_set_inside_and_restored(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(heap, "_glibc", lambda: libc)
    with heap.kept_heap():
        inside = list(libc.calls)
    # glibc malloc.h: M_TRIM_THRESHOLD -1, M_MMAP_THRESHOLD -3; 32 MiB = 32 * 1024 * 1024 = 33,554,432 bytes,
    # 256 MiB = 268,435,456 bytes; glibc's defaults 128 KiB = 131,072 bytes
    assert inside == [("mallopt", -3, 33_554_432), ("mallopt", -1, 268_435_456)]
    assert libc.calls[2:] == [("mallopt", -3, 131_072), ("mallopt", -1, 131_072), ("malloc_trim", 0)]


def test_restored_after_an_exception_and_usable_as_decorator(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(heap, "_glibc", lambda: libc)

    @heap.kept_heap()
    def fails():
        raise KeyError("x")

    with pytest.raises(KeyError):
        fails()
    assert libc.calls[-1] == ("malloc_trim", 0)

    @heap.kept_heap()
    def twice(x):
        return 2 * x

    assert (twice(3), twice(4)) == (6, 8)           # a decorated function is called more than once
    assert sum(c[0] == "malloc_trim" for c in libc.calls) == 3


def test_without_glibc_nothing_is_called(monkeypatch):
    monkeypatch.setattr(heap, "_glibc", lambda: None)
    with heap.kept_heap():
        x = 1
    assert x == 1


def test_real_libc_round_trip():
    # on glibc the real calls succeed; elsewhere the context is a no-op: either way the body runs once
    ran = []
    with heap.kept_heap():
        ran.append(bytearray(4 * 1024 * 1024))
    assert len(ran) == 1 and len(ran[0]) == 4_194_304     # 4 * 1024 * 1024
