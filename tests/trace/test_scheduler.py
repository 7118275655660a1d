"""``--scheduler``: every scheme refused or supported in one line, a handshake in a stated time, and a
cluster lost while running is exit 1 (a report of part of the job only with --allow-partial)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading

import pytest

from _hold import wait_for
from commcost.core.errors import InputError
from commcost.trace.scheduler import check_scheduler
from conftest import ROOT, one_error_line, run_commcost
from test_parallel import _eight_ranks


class _Server:
    """A TCP port that accepts and then says ``greeting`` (None: never a byte)."""

    def __init__(self, greeting: bytes | None) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        self.greeting, self.conns = greeting, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            if self.greeting is not None:
                c.sendall(self.greeting)

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


@pytest.mark.parametrize("address, words", [
    ("tls://127.0.0.1:8786", "tls:// needs certificates"),
    ("ucx://127.0.0.1:8786", "ucx:// needs the UCX bindings"),
    ("ws://127.0.0.1:8786", "ws:// needs Dask's web-socket comm"),
    ("inproc://x", "inside this very process"),
    ("gopher://127.0.0.1:70", "unknown scheme 'gopher'"),
    ("127.0.0.1", "not tcp://HOST:PORT"),
    ("tcp://127.0.0.1:99999", "not tcp://HOST:PORT"),
    ("", "--scheduler is empty"),
])
def test_every_scheme_refused_in_one_line(tmp_path, address, words):
    # at 6a178e4 tls:// and ucx:// ended in "internal error", exit 1
    line = one_error_line(run_commcost("trace", str(_eight_ranks(tmp_path)), "--scheduler", address))
    assert words in line and "--scheduler" in line


def test_a_port_that_accepts_and_never_answers_fails_in_the_stated_time():
    # at 6a178e4 the client waited forever: the connect timeout did not cover the handshake
    srv = _Server(None)
    try:
        with pytest.raises(InputError, match=r"--scheduler .*: connected, but no Dask handshake within 0.5 s"):
            check_scheduler(f"tcp://127.0.0.1:{srv.port}", timeout_s=0.5)
    finally:
        srv.close()


def test_the_cli_gives_up_on_a_silent_port_with_exit_2(tmp_path):
    srv = _Server(None)
    try:
        r = run_commcost("trace", str(_eight_ranks(tmp_path)), "--scheduler", f"127.0.0.1:{srv.port}")
    finally:
        srv.close()
    assert "no Dask handshake within 10 s" in one_error_line(r)


def test_a_service_that_speaks_first_is_not_a_scheduler(tmp_path):
    # at 6a178e4 an SSH banner became "MemoryError: Unable to allocate 3.07 EiB", exit 1
    srv = _Server(b"SSH-2.0-OpenSSH_9.6\r\n")
    try:
        r = run_commcost("trace", str(_eight_ranks(tmp_path)), "--scheduler", f"tcp://127.0.0.1:{srv.port}")
    finally:
        srv.close()
    assert "not a Dask scheduler (it sent 'SSH-2.0-' first)" in one_error_line(r)


_SCHEDULER = '''
import asyncio
from distributed import Scheduler
from distributed.diagnostics.plugin import SchedulerPlugin

class Say(SchedulerPlugin):
    def update_graph(self, scheduler, *args, **kwargs):
        print("tasks submitted", flush=True)

async def main():
    async with Scheduler(host="127.0.0.1", port=0, dashboard_address=None) as s:
        s.add_plugin(Say())
        print(s.address, flush=True)
        await asyncio.Event().wait()

asyncio.run(main())
'''


def test_a_scheduler_lost_while_running_is_exit_1(tmp_path):
    # at 6a178e4: exit 0 and a report of part of the job. A scheduler with no workers runs no task,
    # so the run cannot end before it is killed, once it says the tasks were submitted
    pytest.importorskip("distributed")  # the test extra installs it
    d = _eight_ranks(tmp_path)
    sched = subprocess.Popen([sys.executable, "-c", _SCHEDULER], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                             text=True)
    try:
        address = sched.stdout.readline().strip()
        assert address.startswith("tcp://"), address
        env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
        p = subprocess.Popen([sys.executable, "-m", "commcost", "trace", str(d), "--scheduler", address],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        try:
            wait_for(lambda: "tasks submitted" in sched.stdout.readline(), "the tasks submitted")
            sched.kill()
            out, err = p.communicate(timeout=180)
        finally:
            if p.poll() is None:
                p.kill()
    finally:
        if sched.poll() is None:
            sched.kill()
        sched.communicate()
    assert p.returncode == 1 and out == "", (p.returncode, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("commcost: error: ") and "scheduler" in lines[0], err


def test_one_rank_read_and_the_rest_lost_is_a_failure_unless_partial(tmp_path, monkeypatch):
    # at 6a178e4 a scheduler that died after one rank gave a report of 1 of 8 ranks and exit 0
    from commcost.trace import summary
    from commcost.trace.parallel import RankFailure, analyze_file
    from commcost.trace.reader import trace_files

    files = trace_files(_eight_ranks(tmp_path))

    def one_then_lost(files, **kw):
        return [analyze_file(files[0], 0)] + [
            RankFailure(index=i, path=f, bad_input=False, message=f"{f}: on the cluster: scheduler-connection-lost")
            for i, f in enumerate(files) if i]
    monkeypatch.setattr(summary, "run_ranks", one_then_lost)
    with pytest.raises(OSError, match=r"7 of 8 ranks lost while running .*--allow-partial reports the others"):
        summary.analyze_trace(os.path.dirname(files[0]), scheduler="tcp://127.0.0.1:1")
    s = summary.analyze_trace(os.path.dirname(files[0]), scheduler="tcp://127.0.0.1:1", allow_partial=True)
    assert [r.rank for r in s.ranks] == [0] and len(s.failed) == 7
