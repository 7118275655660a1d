"""Hold a worker process on one file, for tests of signals and processes that wait for a state.

:func:`hold_env` writes a ``sitecustomize`` that every Python process started with the returned
environment imports. In a process whose parent is not the test (a worker that ``commcost`` started,
not ``commcost`` itself), an audit hook blocks the first ``open`` of a path ending in ``target``
forever, after writing its pid to ``marker``: the run cannot end before the test acts, and the test knows the
worker is running (the marker exists) without waiting for a time."""

from __future__ import annotations

import os
import time
from pathlib import Path

from conftest import ROOT

_SITE = '''
import os, sys
if os.environ.get("COMMCOST_TEST_HOLD") and os.getppid() != int(os.environ["COMMCOST_TEST_PID"]):
    _target = os.environ["COMMCOST_TEST_HOLD"]
    _marker = os.environ["COMMCOST_TEST_MARKER"]

    def _hold(event, args):
        if event == "open" and args and isinstance(args[0], str) and args[0].endswith(_target):
            with open(_marker + ".tmp", "w") as fh:
                fh.write(str(os.getpid()))
            os.replace(_marker + ".tmp", _marker)  # whole: the held worker's pid
            import threading
            threading.Event().wait()
    sys.addaudithook(_hold)
'''


def hold_env(tmp_path: Path, target: str) -> tuple[dict, Path]:
    """The environment that holds workers on ``target``, and the marker file that says one is held."""
    site = tmp_path / "hold_site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(_SITE)
    marker = tmp_path / "held.marker"
    env = dict(os.environ, PYTHONPATH=f"{site}{os.pathsep}{ROOT / 'src'}", COMMCOST_TEST_HOLD=target,
               COMMCOST_TEST_PID=str(os.getpid()), COMMCOST_TEST_MARKER=str(marker))
    return env, marker


def wait_for(state, what: str, limit_s: float = 120.0):
    """Poll ``state()`` until it is true (returns its value); fail after ``limit_s`` (a bound, not a wait)."""
    deadline = time.monotonic() + limit_s
    while True:
        value = state()
        if value:
            return value
        assert time.monotonic() < deadline, f"never reached: {what}"
        time.sleep(0.02)


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (Linux /proc)."""
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except FileNotFoundError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as fh:
                    kids = {int(x) for x in fh.read().split()}
            except FileNotFoundError:
                continue
            todo += list(kids - out)
            out |= kids
    return out


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            return not any(line.startswith("State:") and "Z" in line.split()[1] for line in fh)
    except FileNotFoundError:
        return False
