"""The dispatcher's guards (commcost.cli.__init__): a report is refused for a non-finite number it
prints, never for a file name the user chose (issue 24 item 1)."""

from __future__ import annotations

import shutil

import pytest

from commcost.cli import find_non_finite_token
from conftest import DATA, run_commcost

LOG = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"
TRACE = DATA / "traces" / "trace_filter__sampled_rank-0.json.gz"


def test_trace_of_a_file_named_inf_is_reported(tmp_path):
    path = tmp_path / "inf.json"
    shutil.copy(TRACE, path)
    r = run_commcost("trace", str(path))
    assert r.returncode == 0, r.stderr
    assert str(path) in r.stdout


def test_fit_into_a_directory_named_nan_is_written(tmp_path):
    (tmp_path / "nan").mkdir()
    out = tmp_path / "nan" / "p.json"
    r = run_commcost("fit", str(LOG), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.exists() and f"profile written: {out}" in r.stdout


@pytest.mark.parametrize("text, names, bad", [
    ("trace inf.json: 3 ranks", (), False),          # an extension after it: a file name
    ("written to runs/nan", (), False),               # after a slash: a path component
    ("written to nan/p.json", ("nan/p.json",), False),
    ("source inf", ("inf",), False),                  # exactly what the user typed
    ("source runs/inf.json, T = inf s", ("runs/inf.json",), True),  # the number beside it is caught
    ("T = inf.", (), True),                           # the end of a sentence is not an extension
    ("T = nan s", ("nan.json",), True),
])
def test_non_finite_token_skips_names(text, names, bad):
    assert (find_non_finite_token(text, names) is not None) is bad
