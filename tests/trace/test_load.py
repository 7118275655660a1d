"""The loader's checks on each event it keeps (issue 24 item 6 and the distributedInfo part of item 8):
a wrong type or an impossible value is one InputError naming the file and the event, never a
TypeError or OverflowError deep in the analysis (which the command line reports as an internal error)."""

from __future__ import annotations

import pytest

from commcost.core.errors import InputError
from commcost.trace.load import load_rank
from conftest import run_commcost
from conftest import one_error_line

from _kineto import TraceBuilder


def _trace(tmp_path, edit):
    b = TraceBuilder(world_size=2)
    b.param_comms(100, 20, nelems_in=1000)
    b.nccl(130, 50, launch_ts=110)          # events 1 (kernel) and 2 (its launch)
    edit(b)
    return b.write(tmp_path / "t.json")


def _set(index, key, value):
    def edit(b):
        if key.startswith("args."):
            b.events[index]["args"][key[5:]] = value
        else:
            b.events[index][key] = value
    return edit


@pytest.mark.parametrize("index, key, value, words", [
    (1, "args", [1], "event 1 'ncclDevKernel_AllReduce.*': field 'args' is list"),
    (1, "cat", ["kernel"], "event 1 .*field 'cat' is list"),
    (2, "tid", [1], "event 2 'cudaLaunchKernel': field 'tid' is \\[1\\]"),
    (1, "args.stream", {"a": 1}, "event 1 .*field 'stream'"),
    (2, "args.correlation", 2**70, "event 2 'cudaLaunchKernel': args 'correlation' is 1180591620717411303424, "
                                   "outside the 64-bit range"),
    (1, "ts", 10**400, "event 1 .*has ts an integer of 401 digits"),
    (1, "dur", 10**400, "event 1 .*dur an integer of 401 digits"),
    (0, "dur", True, "event 0 'record_param_comms' has a non-numeric ts/dur"),
])
def test_wrong_types_name_the_file_and_the_event(tmp_path, index, key, value, words):
    path = _trace(tmp_path, _set(index, key, value))
    with pytest.raises(InputError, match=f"t.json: {words}"):
        load_rank(path)


def test_wrong_types_are_exit_2_on_the_command_line(tmp_path):
    # item 6 as a user meets it: these were "internal error", exit 1
    for index, key, value in [(1, "args", [1]), (1, "cat", [1]), (2, "tid", [1]), (2, "args.correlation", 2**70),
                              (1, "ts", 10**400)]:
        path = _trace(tmp_path, _set(index, key, value))
        line = one_error_line(run_commcost("trace", str(path)))
        assert str(path) in line and "event" in line


@pytest.mark.parametrize("field, value, words", [
    ("rank", -5, "'rank' is -5, expected an integer from 0 to 1"),
    ("world_size", -3, "'world_size' is -3, expected an integer from 1 to 1,000,000"),
    ("world_size", True, "'world_size' is True"),
    ("rank", 2, "'rank' is 2, expected an integer from 0 to 1"),   # rank < world_size = 2
])
def test_impossible_rank_or_world_size_is_refused(tmp_path, field, value, words):
    path = _trace(tmp_path, lambda b: b.info.__setitem__(field, value))
    with pytest.raises(InputError, match=f"t.json: distributedInfo field {words}"):
        load_rank(path)


def test_gpu_events_sorted_by_start_ties_in_file_order_with_their_fields(tmp_path):
    # issue 37: the loader keeps GPU events in flat arrays while it reads and builds the tuples at the end
    b = TraceBuilder()
    b.compute(300, 10, stream=7)                 # correlation 1, 300-310 us
    b.nccl(100, 50, stream=20)                   # correlation 2, 100-150 us: first by start
    b.compute(300, 5, stream=8)                  # correlation 3, also at 300 us: after 1 (file order)
    b.events.append({"ph": "X", "cat": "kernel", "name": "void gemm_kernel<float>(float*)", "pid": 0, "tid": 9,
                     "ts": 200, "dur": 1, "args": {"stream": "s9", "device": 0}})   # no correlation, a named stream
    rt = load_rank(b.write(tmp_path / "t.json"))
    # times are seconds after the first event's ts (300 us): 100 us -> -200e-6 s, 300 us -> 0
    assert [(g.correlation, g.stream) for g in rt.gpu_events] == [(2, 20), (-1, "s9"), (1, 7), (3, 8)]
    assert [g.start_s for g in rt.gpu_events] == pytest.approx([-200e-6, -100e-6, 0.0, 0.0], abs=1e-15)
    assert [g.end_s for g in rt.gpu_events] == pytest.approx([-150e-6, -99e-6, 10e-6, 5e-6], abs=1e-15)
    assert [g.kind for g in rt.gpu_events] == ["communication", "compute", "compute", "compute"]
    assert rt.gpu_events[0].op.value == "all_reduce" and rt.gpu_events[2].op is None
    assert rt.gpu_events[0].name == "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)"
    assert sorted(rt.launches) == [1, 2, 3]       # the launches of the GPU events with a correlation


def test_the_cyclic_collector_is_back_as_it_was_after_reading(tmp_path):
    import gc

    path = _trace(tmp_path, lambda b: None)
    assert gc.isenabled()
    load_rank(path)
    assert gc.isenabled()
    gc.disable()
    try:
        load_rank(path)
        assert not gc.isenabled()                 # not turned on behind a caller that had it off
    finally:
        gc.enable()
    with pytest.raises(InputError):
        load_rank(_trace(tmp_path, _set(1, "args", [1])))
    assert gc.isenabled()                         # also after a refused file
