"""Local worker processes that die with their parent, however it dies.

:func:`run_on_processes` runs a task function on ``n`` worker interpreters it starts itself
(``python -c``, no multiprocessing forkserver, resource tracker or semaphores to outlive it or to
race an interrupt) and talks to each over two pipes:

* the worker's **stdin** carries the tasks, one length-prefixed pickle at a time; a thread in the
  worker reads it and exits the worker (``os._exit``) at end of file. The parent holds the only
  write end, so when the parent ends -- normally, by an exception, or by SIGKILL, when the kernel
  closes its descriptors -- every worker sees end of file and ends within milliseconds;
* the worker's original **stdout** carries the results back (the worker's own ``sys.stdout`` is
  pointed at stderr, so nothing it prints can corrupt them).

On Linux each worker also asks the kernel for SIGKILL when its parent ends
(``prctl(PR_SET_PDEATHSIG)``), for a worker whose main thread holds the interpreter in one long C
call. SIGINT is ignored in the workers (the terminal sends Ctrl-C to the whole process group; the
parent decides, and ends them). The workers are started with SIGINT and SIGTERM blocked in the parent,
so an interrupt arrives only once every started worker is in the list the parent cleans up. A worker
that dies turns its task into a failure value (``on_lost``), never a hang; the others go on.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["run_on_processes", "usable_cpus", "worker_count"]

_HEADER = struct.Struct(">Q")
"""Each frame: its length, 8 bytes big-endian, then a pickle."""

_BOOT = ("import sys; sys.path.insert(0, sys.argv[1]); "
         "from commcost.trace.pool import _worker_main; _worker_main(int(sys.argv[2]))")
"""What each worker interpreter runs: commcost from the parent's copy, then the task loop."""


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, else the count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def worker_count(requested: int, tasks: int) -> tuple[int, str | None]:
    """``min(requested, CPUs, tasks)`` (at least 1) and, when that is fewer than asked, why.

    More processes than CPUs only take turns on them (and each holds its own interpreter and one
    rank's trace in memory); more than tasks would start idle."""
    cpus = usable_cpus()
    n = max(1, min(requested, cpus, tasks))
    if n >= requested:
        return n, None
    why = f"{cpus} CPU{'s' if cpus != 1 else ''}" if n == cpus else f"{tasks} rank file{'s' if tasks != 1 else ''}"
    return n, f"--workers {requested:,} lowered to {n} ({why})"


@contextmanager
def _signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held (blocked) in this thread while workers start; delivered on exit."""
    held = {signal.SIGINT, signal.SIGTERM}
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


class _Worker:
    """One worker process, its pipes, and the task it holds."""

    def __init__(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # src/
        self.log = tempfile.TemporaryFile()  # the worker's stderr: its last line names why it died
        self.proc = subprocess.Popen([sys.executable, "-c", _BOOT, root, str(os.getpid())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     close_fds=True)
        self.buf = b""
        self.task: tuple | None = None

    def send(self, task: tuple) -> None:
        self.task = task
        data = pickle.dumps(task)
        try:
            self.proc.stdin.write(_HEADER.pack(len(data)) + data)
            self.proc.stdin.flush()
        except OSError:  # it died first (BrokenPipeError): end of file on its results says so, and why
            pass

    def results(self, chunk: bytes) -> list:
        self.buf += chunk
        out = []
        while len(self.buf) >= _HEADER.size:
            (n,) = _HEADER.unpack_from(self.buf)
            if len(self.buf) < _HEADER.size + n:
                break
            out.append(pickle.loads(self.buf[_HEADER.size:_HEADER.size + n]))
            self.buf = self.buf[_HEADER.size + n:]
        return out

    def why_dead(self) -> str:
        code = self.proc.wait()
        self.log.seek(0)
        tail = [x for x in self.log.read().decode("utf-8", "replace").splitlines() if x.strip()]
        what = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        return f"the worker process died ({what}{': ' + tail[-1].strip()[:200] if tail else ''})"

    def close(self, kill: bool) -> None:
        """End the worker: end of file on its stdin (it exits), or SIGKILL; then reap it."""
        try:
            if kill:
                self.proc.kill()
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=None if kill else 30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()
        self.log.close()


def run_on_processes(fn: Callable, tasks: list[tuple], workers: int, *,
                     on_result: Callable[[object, tuple], None],
                     on_lost: Callable[[tuple, str], None]) -> None:
    """``fn(*task)`` for every task on ``workers`` worker processes (module docstring).

    ``on_result(result, task)`` is called in this process as each task ends; ``on_lost(task, why)``
    for a task whose worker died. Every worker is ended and reaped before this returns or raises."""
    pending = deque(tasks)
    pool: list[_Worker] = []
    failed = True
    sel = selectors.DefaultSelector()
    try:
        with _signals_held():
            for _ in range(min(workers, len(tasks))):
                pool.append(_Worker())
        live = 0
        for w in pool:
            w.send((fn, pending.popleft()))
            sel.register(w.proc.stdout, selectors.EVENT_READ, w)
            live += 1
        while live:
            for key, _ in sel.select():
                w = key.data
                chunk = os.read(w.proc.stdout.fileno(), 1 << 16)
                if not chunk:  # the worker died: its task is lost; a fresh worker takes the rest
                    sel.unregister(w.proc.stdout)
                    live -= 1
                    on_lost(w.task[1], w.why_dead())
                    if pending:
                        with _signals_held():
                            nw = _Worker()
                            pool.append(nw)
                        nw.send((fn, pending.popleft()))
                        sel.register(nw.proc.stdout, selectors.EVENT_READ, nw)
                        live += 1
                    continue
                for result in w.results(chunk):
                    task = w.task[1]
                    if pending:
                        w.send((fn, pending.popleft()))
                    else:
                        w.task = None
                        sel.unregister(w.proc.stdout)
                        live -= 1
                        w.proc.stdin.close()  # done: end of file ends it
                    on_result(result, task)
        failed = False
    finally:
        sel.close()
        for w in pool:
            w.close(kill=failed)


def _die_with_parent(parent: int) -> None:
    """SIGKILL from the kernel when the parent ends (Linux), and a check that it has not already."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(0)


def _read_exact(fd: int, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = os.read(fd, n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def _worker_main(parent: int) -> None:
    """A worker: tasks from stdin, results to the original stdout; ends at end of file on stdin."""
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_SETMASK, set())  # the parent started it with them held
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent)
    out = os.dup(1)
    os.dup2(2, 1)  # print() in a task goes to stderr, never into the results
    inbox: deque = deque()
    ready = threading.Condition()

    def reader() -> None:  # the parent-death watch: end of file on stdin ends this process
        while True:
            head = _read_exact(0, _HEADER.size)
            body = _read_exact(0, _HEADER.unpack(head)[0]) if head is not None else None
            if body is None:
                os._exit(0)
            with ready:
                inbox.append(pickle.loads(body))
                ready.notify()

    threading.Thread(target=reader, daemon=True).start()
    while True:
        with ready:
            while not inbox:
                ready.wait()
            fn, task = inbox.popleft()
        data = pickle.dumps(fn(*task))
        _write_all(out, _HEADER.pack(len(data)) + data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
