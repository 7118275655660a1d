"""One line on stderr for every signal in every command (docs/exit-codes.md): ``search``, which keeps
its best so far on stdout, says so too. The search is held inside its first progress call (a
``sitecustomize`` in the test's environment), so it cannot end before the signal, and the test
signals once the held line is printed: a state, not a time."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from conftest import ROOT

_SITE = '''
import sys, time
import commcost.analyses.plan.search as _search

_real = _search.search

def _held(inputs, model, progress=None):
    def hold(done, total, elapsed_s):
        print("held", file=sys.stderr, flush=True)
        time.sleep(3600)
    return _real(inputs, model, progress=hold)

_search.search = _held
'''


@pytest.mark.parametrize("signum, code, line", [(signal.SIGINT, 130, "commcost: interrupted"),
                                                (signal.SIGTERM, 143, "commcost: terminated (SIGTERM)")])
def test_search_says_why_it_stopped(tmp_path, signum, code, line):
    # at 6a178e4: exit 130/143 and the best so far on stdout, nothing on stderr
    (tmp_path / "sitecustomize.py").write_text(_SITE)
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT / 'src'}")
    p = subprocess.Popen([sys.executable, "-m", "commcost", "search", "--model", "llama2-7b", "--system", "dgx-h100",
                          "--gpus", "64", "--global-batch", "256", "--no-progress"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        assert p.stderr.readline().strip() == "held"
        p.send_signal(signum)
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == code, (p.returncode, err)
    assert "configurations evaluated" in out  # the best so far
    assert err.strip().splitlines() == [line]
