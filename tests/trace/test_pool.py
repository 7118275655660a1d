"""Worker processes that die with their parent however it dies, started so that an interrupt never
races their start-up, and never more of them than CPUs or files. Each test waits for a state (a
worker holding a file, a child started), never a time, on inputs that cannot end the run first
(:mod:`_hold`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from _hold import alive, descendants, hold_env, wait_for
from commcost.trace import pool
from commcost.trace.parallel import RankResult, run_ranks
from commcost.trace.reader import trace_files
from conftest import ROOT
from test_parallel import _eight_ranks

needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="reads /proc to find the workers")


def _start(tmp_path, *flags, target="rank5.json"):
    d = _eight_ranks(tmp_path)
    env, marker = hold_env(tmp_path, target)
    p = subprocess.Popen([sys.executable, "-m", "commcost", "trace", str(d), *flags], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    return p, marker


@needs_proc
def test_sigkill_of_the_parent_ends_every_worker(tmp_path):
    # at 6a178e4 the forkserver, the resource tracker and the workers outlived a SIGKILL
    p, marker = _start(tmp_path, "--workers", "2")
    try:
        wait_for(marker.exists, "a worker holding rank5.json")
        kids = descendants(p.pid)
        assert kids, "no worker process"
        p.kill()
        p.wait()
        wait_for(lambda: not any(alive(k) for k in kids), "every worker gone after the parent's SIGKILL")
    finally:
        if p.poll() is None:
            p.kill()
        p.communicate()


@needs_proc
@pytest.mark.parametrize("signum, code, word", [(signal.SIGINT, 130, "interrupted"),
                                                (signal.SIGTERM, 143, "terminated")])
def test_an_interrupt_while_workers_start_is_one_line(tmp_path, signum, code, word):
    # at 6a178e4 a SIGINT during start-up printed a worker's 12-line traceback (1 run in 14); here the
    # signal is sent as soon as the first worker exists, while the others are still being started
    p, _ = _start(tmp_path, "--workers", "2")
    try:
        kids = wait_for(lambda: descendants(p.pid), "a worker started")
        p.send_signal(signum)
        out, err = p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code and out == "", (p.returncode, err)
    assert err.strip().splitlines() == [f"commcost: {word}" + (" (SIGTERM)" if code == 143 else "")], err
    wait_for(lambda: not any(alive(k) for k in kids | descendants(p.pid)), "no worker left")


def test_worker_count_is_bounded_by_cpus_and_files(monkeypatch):
    monkeypatch.setattr(pool, "usable_cpus", lambda: 2)
    # 10**6 asked, 2 CPUs, 500 files: 2, and it says so (at 6a178e4, 50 interpreters on 2 cores)
    assert pool.worker_count(10**6, 500) == (2, "--workers 1,000,000 lowered to 2 (2 CPUs)")
    assert pool.worker_count(2, 500) == (2, None)
    monkeypatch.setattr(pool, "usable_cpus", lambda: 16)
    assert pool.worker_count(8, 3) == (3, "--workers 8 lowered to 3 (3 rank files)")
    assert pool.worker_count(1, 3) == (1, None)


def test_run_ranks_never_starts_more_workers_than_cpus(tmp_path, monkeypatch):
    monkeypatch.setattr(pool, "usable_cpus", lambda: 2)
    files = trace_files(_eight_ranks(tmp_path))
    out = run_ranks(files, workers=10**6)
    assert all(isinstance(r, RankResult) for r in out)
    assert len({r.worker_pid for r in out}) <= 2


def test_the_cli_says_when_it_lowers_workers(tmp_path):
    from conftest import run_commcost

    r = run_commcost("trace", str(_eight_ranks(tmp_path)), "--workers", "1000000", "--json")
    assert r.returncode == 0, r.stderr
    n = min(pool.usable_cpus(), 8)
    why = f"{n} CPU{'s' if n != 1 else ''}" if n < 8 else "8 rank files"
    assert r.stderr.strip().splitlines() == [f"commcost: warning: --workers 1,000,000 lowered to {n} ({why})"]


def test_a_worker_that_dies_fails_the_run_unless_partial_is_asked(tmp_path):
    # a rank lost while running is exit 1 (at 6a178e4: a report of the others and exit 0); the
    # worker holding rank5.json is killed once it holds it
    for partial in (False, True):
        sub = tmp_path / f"p{int(partial)}"
        sub.mkdir()
        p, marker = _start(sub, "--workers", "2", "--json", *(["--allow-partial"] if partial else []))
        try:
            wait_for(marker.exists, "a worker holding rank5.json")
            held = int(marker.read_text())
            assert held in descendants(p.pid)
            os.kill(held, signal.SIGKILL)
            out, err = p.communicate(timeout=120)
        finally:
            if p.poll() is None:
                p.kill()
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "rank5.json" in lines[0] and "died (killed by signal 9)" in lines[0], err
        if partial:
            assert p.returncode == 0 and lines[0].startswith("commcost: warning: 1 of 8 rank files not read")
            assert '"failed_ranks"' in out
        else:
            assert p.returncode == 1 and out == "" and "--allow-partial" in lines[0]

