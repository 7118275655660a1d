"""``commcost search``'s bounds and endings (issue 24 items 4, 9 and the search part of 10): a space is
counted before it is enumerated and refused past a limit with the count; --plot's name is checked
before the search runs; SIGTERM prints the best so far and exits 143."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from commcost.analyses.plan.space import SearchSpace, enumerate_space
from commcost.workload.transformer import TransformerSpec
from conftest import ROOT, run_commcost
from conftest import one_error_line

BASE = ("search", "--model", "llama3-70b", "--system", "dgx-h100", "--global-batch", "1024")


@pytest.mark.parametrize("flags, words", [
    (("--gpus-range", "1:1000000:1"), "--gpus-range 1:1000000:1 is 1,000,000 GPU counts; a search takes at most 64"),
    (("--gpus-range", "1:1000000000000000000"), "--gpus-range: HI must be at most 1,000,000 GPUs"),
    (("--gpus", "512", "--global-batch", "1000000000000"), "--global-batch must be between 1 and 10,000,000 sequences"),
    (("--gpus", "512", "--top", "1000000000"), "--top must be at most 1,000 configurations"),
])
def test_unbounded_flags_are_refused_at_once(flags, words):
    start = time.monotonic()
    line = one_error_line(run_commcost(*BASE, *flags))
    assert words in line
    assert time.monotonic() - start < 30


def test_a_space_past_the_limit_is_refused_with_its_count():
    from commcost.cli.search import MAX_CONFIGURATIONS

    # 64 doubling-free GPU counts of a 1-layer model with a 10^7-sequence batch: billions of layouts
    line = one_error_line(run_commcost("search", "--model", "llama3-70b", "--system", "dgx-h100",
                                       "--global-batch", "9979200", "--gpus-range", "65536:1000000:15360"))
    assert "the space holds up to" in line and f"more than the {MAX_CONFIGURATIONS:,}" in line


def _space(**kw):
    spec = TransformerSpec(name="toy", layers=8, hidden=512, heads=8, vocab=1000)
    return SearchSpace(spec=spec, seq=1024, global_batch=kw.pop("global_batch", 64), gpus=kw.pop("gpus", (16,)),
                       gpus_per_node=8, **kw)


@pytest.mark.parametrize("kw", [{}, {"gpus": (8, 16, 32)}, {"fixed": (("vp", 2),)}, {"fixed": (("tp", 2),)},
                                {"global_batch": 96}, {"even_pipeline_only": True}])
def test_the_count_bounds_the_enumeration(kw):
    from commcost.analyses.plan.space import count_upper_bound

    space = _space(**kw)
    enumerated = sum(len(enumerate_space(space, w)[1]) for w in space.gpus)
    assert 0 < enumerated <= count_upper_bound(space)


def test_the_count_is_exact_without_filters():
    # 1 GPU, dense, B = 1: one structural row (t = p = c = d = b = v = 1); the combinations are sp 0
    # only (t = 1), recompute 3, ZeRO 0 only (no shard shared), cap 1 -> 3 configurations; the
    # upper bound counts sp 2 x recompute 3 x (ZeRO 0-2 x 3 caps + ZeRO 3) = 60
    from commcost.analyses.plan.space import count_upper_bound

    space = _space(gpus=(1,), global_batch=1)
    assert len(enumerate_space(space, 1)[1]) == 3
    assert count_upper_bound(space) == 60


@pytest.mark.parametrize("name", ["x.bmp", "out", "/dev/full"])
def test_plot_name_is_checked_before_the_search(name):
    # item 9: x.bmp ended in "internal error" after the whole search; out wrote out.png; /dev/full.png
    line = one_error_line(run_commcost(*BASE, "--gpus", "512", "--plot", name))
    assert "--plot" in line and "must end in .png or .svg" in line


def test_sigterm_prints_the_best_so_far_and_exits_143():
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    # a search of about 10 million configurations (several seconds of numpy), stopped a few seconds in
    proc = subprocess.Popen([sys.executable, "-m", "commcost", "search", "--model", "deepseek-v3", "--system",
                             "dgx-h100", "--global-batch", "8192", "--seq", "4096", "--gpus", "4096"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    time.sleep(3)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, (proc.returncode, err)
    assert "terminated (SIGTERM)" in out and "Traceback" not in err
