"""Preset files are parsed once per process (issue 37: a repeated plan re-read gpus.json through
``nvls_capable``), and the cache can be dropped by a caller that changed a table in place."""

from __future__ import annotations

import commcost.hardware as hw
from commcost.hardware import registry
from commcost.workload.nccl_memory import nvls_capable


def test_gpus_json_is_read_once_for_many_lookups(monkeypatch):
    registry.clear_preset_caches()
    reads = []
    real = hw.load_preset_file

    def counting(name):
        reads.append(name)
        return real(name)

    monkeypatch.setattr(registry, "load_preset_file", counting)
    for _ in range(5):
        assert nvls_capable("h100-sxm")           # H100 SXM: NVLink 4, an NVLS NVSwitch (gpus.json)
        assert not nvls_capable("a100-sxm4-80gb")  # A100: NVLink 3, no multicast
    assert reads == ["gpus.json"]
    registry.clear_preset_caches()


def test_clearing_the_cache_reads_the_packaged_numbers_again():
    registry.clear_preset_caches()
    table = registry.gpus()
    memory = table["h100-sxm"]["memory_bytes"]
    table["h100-sxm"]["memory_bytes"] = 1.0        # a benchmark's override, in place
    assert registry.gpus()["h100-sxm"]["memory_bytes"] == 1.0   # the shared parse
    registry.clear_preset_caches()
    assert registry.gpus()["h100-sxm"]["memory_bytes"] == memory
    assert registry.gpus() is registry.gpus()


def test_load_preset_file_still_gives_a_fresh_object():
    # its callers that change what they load (tests, benchmarks) keep getting their own copy
    assert hw.load_preset_file("gpus.json") is not hw.load_preset_file("gpus.json")
