"""Malformed measurement files (``calibrate/data.py``, issue 10 items 3, 4 and 13) are one line naming the
file and the row or line and the column; time-0 rows are skipped with a warning in both formats, and
conflicting repeats of one size are warned about."""

from __future__ import annotations

import json

import pytest

from commcost.calibrate.data import COLUMNS, load_series
from conftest import DATA, run_commcost
from conftest import one_error_line

LOG = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"

ROW = {"op": "all_reduce", "gpus": 4, "size_bytes": 1024, "count": 256, "dtype": "float32", "time_s": 3e-5,
       "time_min_s": 2.9e-5, "time_max_s": 3.4e-5, "algbw_bytes_per_s": 3.4e7, "busbw_bytes_per_s": 5.1e7,
       "iters": 20}


def measurement(tmp_path, rows, name="m.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "kind": "commcost-measurement", "provenance": {}, "rows": rows}))
    return str(path)


def rows_of(sizes_times):
    return [dict(ROW, size_bytes=s, count=s // 4, time_s=t) for s, t in sizes_times]

GOOD = [(2**k, 2e-5 + 2**k / 5e9) for k in range(10, 21)]  # 11 sizes, 1 KiB .. 1 MiB on a 5 GB/s line


def test_deeply_nested_measurement_is_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    line = one_error_line(run_commcost("fit", str(deep)))
    assert line == f"commcost: error: {deep}: JSON nested too deeply to read (thousands of brackets)"


@pytest.mark.parametrize("edit, fragment", [
    ({"gpus": [4]}, "rows[3]: column 'gpus' must be a number, got [4]"),
    ({"time_s": "fast"}, "rows[3]: column 'time_s' must be a number, got 'fast'"),
    ({"time_s": None}, "rows[3]: missing column(s) time_s"),
    ({"op": 7}, "rows[3]: column 'op' must be a name, got 7"),
    ({"op": "magic"}, "rows[3]: unknown collective 'magic'"),
    ({"gpus": 10**7}, "rows[3]: column 'gpus' must be between 1 and 1e+06, got 10000000"),
    ({"size_bytes": 10**180}, "rows[3]: column 'size_bytes' must be between 0 and 1.15292e+18, got 1000000000"),
])
def test_wrong_field_in_a_measurement_row(tmp_path, edit, fragment):
    rows = rows_of(GOOD)
    rows[3].update(edit)
    path = measurement(tmp_path, rows)
    line = one_error_line(run_commcost("fit", path))
    assert line.startswith(f"commcost: error: {path}: ") and fragment in line
    assert len(line) < 300  # 10**180 is shown as its first digits and its length, not 181 digits


def test_wrong_value_in_a_measurement_csv_names_the_line(tmp_path):
    path = tmp_path / "m.csv"
    lines = ["# commcost-measurement version 1", ",".join(COLUMNS)]
    lines += [",".join(str(r[c]) for c in COLUMNS) for r in rows_of(GOOD)]
    lines[5] = lines[5].rsplit(",", 1)[0] + ",twenty"  # data row 4 is line 6 of the file; iters is last
    path.write_text("\n".join(lines) + "\n")
    line = one_error_line(run_commcost("fit", str(path)))
    assert line == f"commcost: error: {path}:6: column 'iters' must be a number, got 'twenty'"


def test_a_non_finite_number_in_a_measurement_is_refused(tmp_path):
    rows = rows_of(GOOD)
    rows[0]["time_s"] = float("inf")
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"version": 1, "kind": "commcost-measurement", "provenance": {}, "rows": rows}))
    line = one_error_line(run_commcost("fit", str(path)))
    assert "rows[0]: column 'time_s' must be a finite number, got inf" in line


def test_time_zero_is_skipped_with_a_warning_in_both_formats(tmp_path):
    log = tmp_path / "all_reduce_perf.log"
    text = LOG.read_text().splitlines()
    # line 45 is the 1024 B row: both its times set to 0.00
    text[44] = text[44].replace("29.75", " 0.00").replace("26.65", " 0.00")
    log.write_text("\n".join(text) + "\n")
    r = run_commcost("fit", str(log), "--json")
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"commcost: warning: {log}: line 45: skipped all_reduce at 1024 B: time 0 (below the timer's resolution) "
        "is no point of the curve"]
    rows = rows_of(GOOD)
    rows[2]["time_s"] = 0.0
    path = measurement(tmp_path, rows)
    r = run_commcost("fit", path, "--json")
    assert r.returncode == 0, r.stderr  # used to be refused ("time_s must be > 0", no file named)
    assert r.stderr.strip().splitlines() == [
        f"commcost: warning: {path}: rows[2]: skipped all_reduce at 4096 B: time 0 (below the timer's "
        "resolution) is no point of the curve"]
    assert len(load_series(path).samples) == len(GOOD) - 1


def test_duplicate_sizes_with_conflicting_times_warn(tmp_path):
    # 4096 B at 2e-5 + 4096/5e9 = 20.82 us, and again at 60 us: 60 / 20.82 = 2.9 > 1.5
    rows = rows_of(GOOD + [(4096, 6e-5)])
    path = measurement(tmp_path, rows)
    r = run_commcost("fit", path)
    assert r.returncode == 0, r.stderr
    assert r.stderr.strip().splitlines() == [
        f"commcost: warning: {path}: 4096 B measured 2 times with conflicting times (20.82 us in rows[2], "
        "60 us in rows[11]); their median is fitted"]  # issue 24 item 11: a size is one sample, pooled
    # a repeat within 1.5x is no conflict: 20.82 vs 25 us
    r = run_commcost("fit", measurement(tmp_path, rows_of(GOOD + [(4096, 2.5e-5)]), "m2.json"))
    assert r.returncode == 0 and r.stderr == ""
