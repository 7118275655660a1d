"""Ranks as independent tasks: local processes and a Dask cluster give the serial answer;
progress, a failing rank, no process left behind, the missing-Dask hint."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from commcost.trace.parallel import RankFailure, RankResult, run_ranks
from commcost.trace.reader import trace_files
from conftest import ROOT, run_commcost
from _kineto import TraceBuilder


def _eight_ranks(tmp_path):
    """Eight ranks of two steps: compute, then two all-reduces; rank r's clock r * 700 us ahead,
    rank r arriving r * 30 us later at the second all-reduce of each step."""
    d = tmp_path / "job8"
    d.mkdir()
    for r in range(8):
        b = TraceBuilder(rank=r, world_size=8)
        o = 700.0 * r
        for step in range(3):
            t0 = 10_000.0 * step + o
            b.step(step + 1, t0, 9_000)
            b.compute(t0 + 100, 3_000 + 10 * r)
            for k, (a, late) in enumerate(((3_200, 0.0), (5_000, 30.0 * r))):
                b.param_comms(t0 + a - 50 + late, 20, nelems_in=1_000_000 * (k + 1), group=8)
                b.nccl(t0 + a + late, 1_500 - late + 30.0 * 7, launch_ts=t0 + a - 40 + late)
            b.compute(t0 + 5_000, 1_000)
        b.write(tmp_path / "job8" / f"rank{r}.json")
    return d


def _json(*args):
    r = run_commcost("trace", *args, "--json")
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_workers_give_the_serial_json(tmp_path):
    d = _eight_ranks(tmp_path)
    serial = _json(str(d), "--workers", "1")
    assert _json(str(d), "--workers", "2") == serial
    out = json.loads(serial)
    assert [r["rank"] for r in out["ranks"]] == list(range(8))
    # rank r's clock is r * 700 us ahead of rank 0's
    offs = {o["rank"]: o["clock_offset_s"] for o in out["cross_rank"]["clock_offsets"]}
    assert all(offs[r] == pytest.approx(700e-6 * r, abs=1e-9) for r in range(8))
    # the second all-reduce of each step: rank 7 arrives 7 * 30 = 210 us after rank 0, the skew
    inst = out["cross_rank"]["instances"]
    assert max(i["skew_s"] for i in inst) == pytest.approx(210e-6, abs=1e-9)
    assert {i["straggler_rank"] for i in inst if i["skew_s"] > 1e-6} == {7}
    for key in ("op", "comm", "index", "skew_s", "transfer_s", "straggler_rank", "ranks"):
        assert key in inst[0]
    assert set(inst[0]["ranks"][0]) == {"rank", "wait_s"}
    assert set(out["cross_rank"]["per_rank"][0]) == {"rank", "wait_s", "transfer_s", "straggler_count"}
    assert set(out["cross_rank"]["clock_offsets"][0]) >= {"rank", "clock_offset_s"}


def test_dask_local_cluster_gives_the_serial_json(tmp_path):
    import distributed  # the test extra installs dask[distributed]

    d = _eight_ranks(tmp_path)
    serial = _json(str(d))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, host="127.0.0.1",
                                  protocol="tcp", dashboard_address=None) as cluster:
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        r = run_commcost("trace", str(d), "--scheduler", cluster.scheduler_address, "--json", "--progress")
    assert r.returncode == 0, r.stderr
    assert r.stdout == serial
    assert sum("rank files read" in line for line in r.stderr.splitlines()) == 8


def test_progress_on_stderr_and_a_failing_rank_in_one_line(tmp_path):
    d = _eight_ranks(tmp_path)
    bad = d / "rank3.json"
    bad.write_text(bad.read_text()[:2000])
    r = run_commcost("trace", str(d), "--workers", "2", "--json", "--progress")
    # the others are reported (exit 0); the bad one is named in one warning line
    assert r.returncode == 0
    lines = r.stderr.strip().splitlines()
    progress = [x for x in lines if "rank files read" in x]
    errors = [x for x in lines if x not in progress]
    assert len(progress) == 8 and progress[-1].startswith("commcost trace: 8/8")
    assert len(errors) == 1 and errors[0].startswith("commcost: warning: 1 of 8 rank files not read")
    assert str(bad) in errors[0] and "truncated" in errors[0]
    out = json.loads(r.stdout)
    assert [x["rank"] for x in out["ranks"]] == [0, 1, 2, 4, 5, 6, 7]
    assert out["failed_ranks"][0]["path"] == str(bad)
    # without --progress (stderr not a terminal): the one line only
    r = run_commcost("trace", str(d), "--workers", "2")
    assert r.returncode == 0 and len(r.stderr.strip().splitlines()) == 1
    assert "not read (1 of 8 rank files)" in r.stdout
    # every rank bad: nothing to report, one error line, exit 2
    for f in d.iterdir():
        f.write_text("[1]")
    r = run_commcost("trace", str(d), "--workers", "2")
    assert r.returncode == 2 and r.stdout == "" and len(r.stderr.strip().splitlines()) == 1


def test_no_worker_process_outlives_the_run(tmp_path):
    files = trace_files(_eight_ranks(tmp_path))
    out = run_ranks(files, workers=2)
    assert all(isinstance(r, RankResult) for r in out) and [r.index for r in out] == list(range(8))
    pids = {r.worker_pid for r in out}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    # each worker's peak memory is reported (a few tens of MB for these small files)
    assert all(0 < r.worker_peak_rss_bytes < 2**31 for r in out)


def test_a_failure_comes_back_as_a_value(tmp_path):
    files = trace_files(_eight_ranks(tmp_path))
    with open(files[0], "w") as fh:
        fh.write("[1, 2]")
    out = run_ranks(files, workers=1)
    assert isinstance(out[0], RankFailure) and out[0].bad_input and files[0] in out[0].message
    assert all(isinstance(r, RankResult) for r in out[1:])


def test_missing_dask_is_one_line_with_the_extra(tmp_path):
    fake = tmp_path / "nodask" / "distributed"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no dask here')\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path / 'nodask'}{os.pathsep}{ROOT / 'src'}")
    d = _eight_ranks(tmp_path)
    r = subprocess.run([sys.executable, "-m", "commcost", "trace", str(d), "--scheduler", "tcp://127.0.0.1:1"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == ["commcost: error: --scheduler needs dask[distributed]: "
                                             "pip install 'commcost[dask]'"]


def test_workers_and_scheduler_together_refused(tmp_path):
    r = run_commcost("trace", str(_eight_ranks(tmp_path)), "--workers", "2", "--scheduler", "tcp://127.0.0.1:1")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "give one" in r.stderr


def test_text_shows_the_ranks_that_wait_most(tmp_path, monkeypatch):
    from commcost.report import trace as report
    from commcost.trace.summary import analyze_trace

    s = analyze_trace(_eight_ranks(tmp_path))
    monkeypatch.setattr(report, "CROSS_RANKS_SHOWN", 3)
    lines = report.render_trace_text(s, width=80).splitlines()
    head = next(i for i, x in enumerate(lines) if x.split()[:2] == ["rank", "clock"])
    table = lines[head + 1:head + 4]
    assert lines[head + 4].startswith("  (the 3 of 8 ranks")
    # the waits are hidden under compute (no exposed waiting); rank r waits (7 - r) * 30 us in each of
    # the 3 steps, so ranks 0, 1, 2 wait most: 630, 540, 450 us
    assert [int(x.split()[0]) for x in table] == [0, 1, 2]
    assert [x.split()[2] for x in table] == ["0.630", "0.540", "0.450"]


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc to find the worker processes")
def test_ctrl_c_leaves_no_worker_behind(tmp_path):
    """Twelve copies of a real trace, each given its own rank (the same rank twice is refused, exit 2,
    which could end the run before the signal); a worker is held on one of them (:mod:`_hold`), so the
    run cannot end first, and the SIGINT is sent once a rank has been read and the worker holds its file."""
    import gzip
    import signal

    from _hold import alive, descendants, hold_env, wait_for

    d = tmp_path / "job"
    d.mkdir()
    nccl = json.loads(gzip.decompress((ROOT / "tests" / "data" / "traces" /
                                       "nccl_parser_config__nccl_data.json.gz").read_bytes()))
    for r in range(12):
        nccl["distributedInfo"] = dict(nccl.get("distributedInfo") or {}, rank=r, world_size=12)
        (d / f"rank{r:02d}.json.gz").write_bytes(gzip.compress(json.dumps(nccl).encode()))
    env, marker = hold_env(tmp_path, "rank07.json.gz")
    p = subprocess.Popen([sys.executable, "-m", "commcost", "trace", str(d), "--workers", "2", "--progress"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        first = p.stderr.readline()
        assert "rank files read" in first, first
        wait_for(marker.exists, "a worker holding rank07.json.gz")
        kids = descendants(p.pid)
        assert len(kids) == 2  # the two workers, nothing else
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130 and out == "" and "interrupted" in err, (p.returncode, err)
    assert "Traceback" not in err
    wait_for(lambda: not any(alive(k) for k in kids), "every worker gone")
