"""Profiles with non-finite or impossible numbers, or nested too deeply, are refused at load
(``calibrate/profile.py``, issue 10 items 3 and 4) by every command that takes ``--profile``."""

from __future__ import annotations

import json

import pytest

from conftest import DATA, run_commcost
from conftest import one_error_line

LOG = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"


def profile(tmp_path, **edit):
    out = tmp_path / "p.json"
    r = run_commcost("fit", str(LOG), "-o", str(out))
    assert r.returncode == 0, r.stderr
    obj = json.loads(out.read_text())
    for path, value in edit.items():
        where = obj
        keys = path.split(".")
        for key in keys[:-1]:
            where = where[int(key)] if key.isdigit() else where[key]
        where[keys[-1]] = value
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(obj))  # json.dumps writes NaN as NaN, as a careless writer would
    return str(bad)


def test_deeply_nested_profile_is_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    line = one_error_line(run_commcost("validate", str(LOG), "--profile", str(deep)))
    assert line == f"commcost: error: {deep}: not a commcost profile: JSON nested too deeply to read"


@pytest.mark.parametrize("edit, fragment", [
    ({"quality.r2": float("nan")}, "quality: field 'r2' must be a finite number, got nan"),
    ({"regimes.0.alpha_s": float("inf")}, "regimes[0]: field 'alpha_s' must be a finite number, got inf"),
    ({"regimes.0.bandwidth_bytes_per_s": 1e-308}, "field 'bandwidth_bytes_per_s' must be between 1000 and 1e+15"),
    ({"gpus": 10**400}, "field 'gpus' must be between 1 and 1e+06"),
])
@pytest.mark.parametrize("command", [
    ("budget", "--params", "1.3", "--step-ms", "400", "--json"),
    ("timeline", "--params", "1.3", "--step-ms", "400", "--json"),
    ("scaling", "--params", "1.3", "--compute-ms", "400", "--json"),
    ("collective", "--op", "all_reduce", "--size", "1MiB", "--json"),
])
def test_bad_profile_is_refused_by_every_command(tmp_path, edit, fragment, command):
    # a profile with "r2": NaN was accepted, then budget/timeline/scaling/collective --json crashed
    path = profile(tmp_path, **edit)
    line = one_error_line(run_commcost(*command, "--profile", path))
    assert line.startswith(f"commcost: error: {path}: ") and fragment in line


def test_validate_with_a_profile_of_tiny_bandwidth_is_refused(tmp_path):
    # B = 1e-308 used to give "median_abs_rel_error": Infinity in --json (not JSON)
    path = profile(tmp_path, **{"regimes.0.bandwidth_bytes_per_s": 1e-308})
    line = one_error_line(run_commcost("validate", str(LOG), "--profile", path, "--json"))
    assert "must be between 1000 and 1e+15" in line
