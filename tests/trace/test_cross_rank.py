"""Across ranks: clock offsets, wait vs transfer per collective instance, exposed waiting vs moving.

Multi-rank traces built with known clock offsets and known early arrivals, by copying a real
rank's trace (HTA's nccl_parser_config, rank 0 of 2) and by hand; hypothesis for the invariants.
"""

from __future__ import annotations

import copy
import gzip
import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commcost.comm.collectives import Collective
from commcost.trace.collectives import TimedCall
from commcost.trace.cross_rank import cross_rank
from commcost.trace.summary import analyze_trace
from conftest import DATA
from _kineto import TraceBuilder

NCCL = DATA / "traces" / "nccl_parser_config__nccl_data.json.gz"


@pytest.fixture(scope="module")
def nccl_events():
    return json.loads(gzip.decompress(NCCL.read_bytes()))


def _copy_as_rank(obj, rank, shift_us, early_us=0.0, early_kernel=None):
    """``obj`` as rank ``rank``, every timestamp ``+ shift_us``; the ``early_kernel``-th all-reduce
    kernel starting ``early_us`` sooner (same end)."""
    o = copy.deepcopy(obj)
    o["distributedInfo"]["rank"] = rank
    k = 0
    for e in o["traceEvents"]:
        if "ts" in e:
            e["ts"] += shift_us
        if e.get("cat") == "kernel" and e.get("name", "").startswith("ncclKernel_AllReduce"):
            if k == early_kernel:
                e["ts"] -= early_us
                e["dur"] += early_us
            k += 1
    return o


def _job(tmp_path, obj, early_us=0.0, early_kernel=None):
    d = tmp_path / "job"
    d.mkdir()
    (d / "rank0.json").write_text(json.dumps(_copy_as_rank(obj, 0, 0.0)))
    (d / "rank1.json").write_text(json.dumps(_copy_as_rank(obj, 1, 5000.0, early_us, early_kernel)))
    return d


def test_copy_shifted_5ms_has_offset_5ms_and_no_skew(tmp_path, nccl_events):
    s = analyze_trace(_job(tmp_path, nccl_events))
    c = s.cross
    off = {o.rank: o.clock_offset_s for o in c.clock_offsets}
    # every event of rank 1 is 5,000 us later on its clock: delta_1 = 5 ms, delta_0 = 0 (the reference)
    assert off[0] == 0.0 and off[1] == pytest.approx(5e-3, abs=10e-6)
    # the 21 timed calls (15 all-reduces, 6 broadcasts; the 6 waits launch no kernel), all on communicator "name 0"
    assert len(c.instances) == 21 and c.unmatched_calls == 0
    assert all(i.skew_s < 1e-9 and i.straggler_rank is None for i in c.instances)
    assert all(w.wait_s < 1e-8 and w.straggler_count == 0 for w in c.per_rank)
    # identical copies: rank 1's exposed communication is rank 0's, and none of it is waiting
    r0, r1 = s.ranks
    assert r1.total.exposed_communication_s == pytest.approx(r0.total.exposed_communication_s, rel=1e-9)
    assert all(w.exposed_waiting_s < 1e-8 for w in c.per_rank)


def test_kernel_3ms_early_is_the_skew_the_wait_and_names_the_straggler(tmp_path, nccl_events):
    s = analyze_trace(_job(tmp_path, nccl_events, early_us=3000.0, early_kernel=4))
    c = s.cross
    off = {o.rank: o.clock_offset_s for o in c.clock_offsets}
    # the early kernel ends when it did: the median of the 15 end differences is still 5 ms
    assert off[1] == pytest.approx(5e-3, abs=10e-6)
    skewed = [i for i in c.instances if i.skew_s > 1e-6]
    assert len(skewed) == 1
    inst = skewed[0]
    # rank 1 arrives 3 ms before rank 0 (on the aligned clock): skew = last - first = 3 ms,
    # rank 1 waits 3 ms, rank 0 (last) waits 0 and is the straggler
    assert inst.op is Collective.ALL_REDUCE and inst.comm == "name 0"
    assert inst.skew_s == pytest.approx(3e-3, abs=10e-6)
    waits = dict(inst.ranks)
    assert waits[1] == pytest.approx(3e-3, abs=10e-6) and waits[0] == pytest.approx(0.0, abs=1e-9)
    assert inst.straggler_rank == 0
    per = {w.rank: w for w in c.per_rank}
    assert per[1].wait_s == pytest.approx(3e-3, abs=10e-6) and per[0].wait_s == pytest.approx(0.0, abs=1e-8)
    assert per[0].straggler_count == 1 and per[1].straggler_count == 0
    # the transfer is the same on both ranks and is rank 0's kernel time (it waited for nobody)
    assert per[0].transfer_s == pytest.approx(per[1].transfer_s)
    # exposed communication splits into waiting + moving exactly
    for r in s.ranks:
        w = per[r.rank]
        assert w.exposed_waiting_s + w.exposed_moving_s == pytest.approx(r.total.exposed_communication_s)
    assert 0 < per[1].exposed_waiting_s <= 3e-3 + 1e-9
    # the advice names rank 0; its gain: mean over the 2 ranks of exposed waiting per step (2 steps counted)
    adv = {a.kind: a for a in s.advice}
    assert "rank 0" in adv["stragglers"].what
    assert adv["stragglers"].gain_s == pytest.approx((0 + per[1].exposed_waiting_s / 2) / 2)


def _hand_job(tmp_path):
    """Three ranks; clocks: rank 1 reads 2,000 us ahead of rank 0, rank 2 500 us behind.

    Rank 0 and 1 share communicator "0" (two all-reduces); ranks 1 and 2 share communicator "1"
    (one all-gather), so rank 2 is aligned through rank 1. Instance times on the true clock (us):

    * all_reduce #0 on 0: rank 0 arrives 1000, rank 1 arrives 1400; both end 1600
    * all_reduce #1 on 0: rank 0 arrives 3000, rank 1 arrives 2900; both end 3300
    * all_gather #0 on 1: rank 1 arrives 5000, rank 2 arrives 5250; both end 5400
    """
    offsets = {0: 0.0, 1: 2000.0, 2: -500.0}
    plan = {0: [("0", "allreduce", "AllReduce", 1000, 1600), ("0", "allreduce", "AllReduce", 3000, 3300)],
            1: [("0", "allreduce", "AllReduce", 1400, 1600), ("0", "allreduce", "AllReduce", 2900, 3300),
                ("1", "_allgather_base", "AllGather", 5000, 5400)],
            2: [("1", "_allgather_base", "AllGather", 5250, 5400)]}
    d = tmp_path / "hand"
    d.mkdir()
    for rank, calls in plan.items():
        b = TraceBuilder(rank=rank, world_size=3)
        o = offsets[rank]
        b.compute(100 + o, 50)          # the first event: every rank's origin is its own
        for pg, name, kernel_op, a, e in calls:
            b.events.append({"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1,
                             "ts": a + o - 20, "dur": 10,
                             "args": {"Collective name": name, "In msg nelems": 1000, "Out msg nelems": 1000,
                                      "dtype": "Float", "Group size": 2, "Process Group Name": pg}})
            b.nccl(a + o, e - a, op=kernel_op, launch_ts=a + o - 15)
        b.write(d / f"rank{rank}.json")
    return d


def test_hand_made_three_ranks_two_communicators(tmp_path):
    s = analyze_trace(_hand_job(tmp_path))
    c = s.cross
    off = {o.rank: o.clock_offset_s for o in c.clock_offsets}
    # rank 1: median of end differences (1600+2000)-1600 and (3300+2000)-3300 = 2,000 us;
    # rank 2 through rank 1: (5400-500) - (5400+2000-2000) = -500 us
    assert off == pytest.approx({0: 0.0, 1: 2e-3, 2: -0.5e-3}, abs=1e-9)
    assert all(o.aligned for o in c.clock_offsets)
    by = {(i.op, i.comm, i.index): i for i in c.instances}
    a0 = by[(Collective.ALL_REDUCE, "name 0", 0)]
    # skew 1400 - 1000 = 400 us; transfer 1600 - 1400 = 200 us; rank 0 waits 400 us; rank 1 is last
    assert (a0.skew_s, a0.transfer_s, a0.straggler_rank) == pytest.approx((400e-6, 200e-6, 1))
    assert dict(a0.ranks) == pytest.approx({0: 400e-6, 1: 0.0}, abs=1e-12)
    a1 = by[(Collective.ALL_REDUCE, "name 0", 1)]
    # skew 3000 - 2900 = 100 us; transfer 3300 - 3000 = 300 us; rank 1 waits 100 us; rank 0 is last
    assert (a1.skew_s, a1.transfer_s, a1.straggler_rank) == pytest.approx((100e-6, 300e-6, 0))
    g = by[(Collective.ALL_GATHER, "name 1", 0)]
    # skew 5250 - 5000 = 250 us; transfer 5400 - 5250 = 150 us; rank 2 is last
    assert (g.skew_s, g.transfer_s, g.straggler_rank) == pytest.approx((250e-6, 150e-6, 2))
    per = {w.rank: w for w in c.per_rank}
    # rank 0: waits 400 + 0 = 400 us, transfers 200 + 300 = 500 us, last once
    assert (per[0].wait_s, per[0].transfer_s, per[0].straggler_count) == pytest.approx((400e-6, 500e-6, 1))
    # rank 1: waits 0 + 100 + 250 = 350 us, transfers 200 + 300 + 150 = 650 us, last once
    assert (per[1].wait_s, per[1].transfer_s, per[1].straggler_count) == pytest.approx((350e-6, 650e-6, 1))
    assert (per[2].wait_s, per[2].transfer_s, per[2].straggler_count) == pytest.approx((0.0, 150e-6, 1))
    # no compute beside any collective: all communication is exposed; rank 0's 900 us of it
    # (600 + 300) hold its 400 us wait, rank 1's 1,000 us (200 + 400 + 400) its 350 us
    assert per[0].exposed_waiting_s == pytest.approx(400e-6) and per[0].exposed_moving_s == pytest.approx(500e-6)
    assert per[1].exposed_waiting_s == pytest.approx(350e-6) and per[1].exposed_moving_s == pytest.approx(650e-6)
    # the model compares with the transfer: the all-reduce row (4,000 B) has median(200, 300) = 250 us
    rows = c.row_transfer_s()
    assert rows[(Collective.ALL_REDUCE, 4000, 2, "Float")] == pytest.approx(250e-6)


def test_a_rank_sharing_nothing_is_not_aligned(tmp_path):
    d = _hand_job(tmp_path)
    b = TraceBuilder(rank=3, world_size=4)
    b.compute(0, 10)
    b.write(d / "rank3.json")
    c = analyze_trace(d).cross
    o3 = next(o for o in c.clock_offsets if o.rank == 3)
    assert not o3.aligned and o3.clock_offset_s == 0.0


def _call(rank, comm, start, end, op=Collective.ALL_REDUCE):
    return TimedCall(rank=rank, op=op, size_bytes=1024, dtype="Float", group_size=2, group_size_source="Group size",
                     comm=comm, start_s=start, end_s=end, issue_s=start)


def _result(rank, calls, origin_us=0):
    total = SimpleNamespace(exposed_communication_s=0.0)
    return SimpleNamespace(summary=SimpleNamespace(rank=rank, total=total), origin_us=origin_us,
                           timed=tuple(calls), exposed=())


@settings(max_examples=60, deadline=None)
@given(offset_us=st.integers(-10**7, 10**7), origin_us=st.integers(0, 10**12),
       arrivals=st.lists(st.tuples(st.floats(0, 5e-3), st.floats(0, 5e-3), st.floats(1e-5, 1e-2)),
                         min_size=1, max_size=12))
def test_offsets_recovered_and_waits_consistent(offset_us, origin_us, arrivals):
    # true times: instance k on the shared clock starts at 0.1 k s; rank r arrives a_r later, both end
    # together at 0.1 k + max(a_0, a_1) + x. Rank 1's clock reads offset_us ahead, its origin is origin_us later.
    r0, r1 = [], []
    for k, (a0, a1, x) in enumerate(arrivals):
        base = 0.1 * k + 1.0
        end = base + max(a0, a1) + x
        r0.append(_call(0, "g", base + a0, end))
        r1.append(_call(1, "g", base + a1 + offset_us * 1e-6 - origin_us * 1e-6,
                        end + offset_us * 1e-6 - origin_us * 1e-6))
    c = cross_rank([_result(0, r0), _result(1, r1, origin_us=origin_us)])
    assert c.clock_offsets[1].clock_offset_s == pytest.approx(offset_us * 1e-6, abs=1e-6)
    for inst, (a0, a1, x) in zip(sorted(c.instances, key=lambda i: i.index), arrivals):
        w = dict(inst.ranks)
        # skew = |a_0 - a_1|, the earlier rank waits it, the later none; transfer = x
        assert inst.skew_s == pytest.approx(abs(a0 - a1), abs=2e-6)
        assert max(w.values()) == pytest.approx(inst.skew_s, abs=1e-9) and min(w.values()) == pytest.approx(0, abs=1e-9)
        assert inst.transfer_s == pytest.approx(x, abs=2e-6)
    per = {p.rank: p for p in c.per_rank}
    assert per[0].wait_s + per[1].wait_s == pytest.approx(sum(i.skew_s for i in c.instances), abs=1e-9)
    assert per[0].transfer_s == pytest.approx(per[1].transfer_s)
