"""Issue 10, items 3, 4, 11, 12 and the file items of 13: malformed measurement and profile files are
one line naming the file and the field or row; output files are written through links and devices,
with the umask; unwritable outputs are refused before any work. Each case runs the command."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from commcost.calibrate.data import COLUMNS, load_series
from commcost.calibrate.profile import write_atomic
from conftest import DATA, ROOT, run_commcost
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


# --- 3: deeply nested JSON -------------------------------------------------------------------------

def test_deeply_nested_measurement_is_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    line = one_error_line(run_commcost("fit", str(deep)))
    assert line == f"commcost: error: {deep}: JSON nested too deeply to read (thousands of brackets)"


def test_deeply_nested_profile_is_one_line(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    line = one_error_line(run_commcost("validate", str(LOG), "--profile", str(deep)))
    assert line == f"commcost: error: {deep}: not a commcost profile: JSON nested too deeply to read"


# --- 4: wrong types, named by file, row and column ------------------------------------------------

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


# --- profiles with non-finite or impossible numbers are refused at load ------------------------------

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


# --- 13: time 0 rows, duplicate sizes, consistent between the formats --------------------------------

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


# --- 8, 11, 12: output paths ------------------------------------------------------------------------

@pytest.mark.parametrize("args, flag", [
    (("fit", str(LOG), "-o", ""), "-o"),
    (("validate", str(LOG), "--profile", "p.json", "--plot", ""), "--plot"),
    (("measure", "-o", ""), "-o"),
])
def test_empty_output_names_are_refused(args, flag):
    # fit -o '' and validate --plot '' exited 0 and wrote nothing
    assert one_error_line(run_commcost(*args)) == f"commcost: error: {flag} '': expected a file name, got an empty one"


def _unwritable_dir(tmp_path):
    """A directory no file can be created in: mode 555, and immutable where root ignores the mode."""
    d = tmp_path / "locked"
    d.mkdir()
    d.chmod(0o555)
    try:
        (d / "probe").touch()
    except OSError:
        return d, lambda: d.chmod(0o755)
    (d / "probe").unlink()
    subprocess.run(["chattr", "+i", str(d)], check=True)  # root: the mode does not stop it, +i does
    return d, lambda: (subprocess.run(["chattr", "-i", str(d)], check=True), d.chmod(0o755))


@pytest.mark.parametrize("command", [("fit", str(LOG)), ("measure", "--sizes", "16KiB:64KiB")])
def test_unwritable_output_directory_is_refused_before_any_work(tmp_path, command):
    # measure used to spawn ranks, run ~10 s, then fail naming its temporary file
    d, undo = _unwritable_dir(tmp_path)
    try:
        target = d / "out.csv"
        line = one_error_line(run_commcost(*command, "-o", str(target)))
        assert line.startswith(f"commcost: error: -o {str(target)!r}: cannot create a file in {str(d)!r}")
        assert sorted(p.name for p in d.iterdir()) == []  # no probe, no temporary file left behind
    finally:
        undo()


def _run_with_umask(mask, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "commcost", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120, preexec_fn=lambda: os.umask(mask))


@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_new_profile_honours_the_umask(tmp_path, mask, mode):
    # mkstemp alone made every profile 0600; 0666 & ~umask is what open() gives
    out = tmp_path / "p.json"
    r = _run_with_umask(mask, "fit", str(LOG), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == mode


def test_rewritten_profile_keeps_its_mode(tmp_path):
    out = tmp_path / "p.json"
    out.write_text("{}")
    out.chmod(0o640)
    r = _run_with_umask(0o077, "fit", str(LOG), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o640 and json.loads(out.read_text())["kind"] == "commcost-profile"


def test_profile_through_a_symlink_keeps_the_link(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("{}")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    r = run_commcost("fit", str(LOG), "-o", str(link))
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["kind"] == "commcost-profile"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]


def test_profile_to_a_device_writes_through_it(tmp_path):
    # -o n.json where n.json was a character device turned it into a regular 0600 file
    r = run_commcost("fit", str(LOG), "-o", os.devnull)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE, text=True)
    r = run_commcost("fit", str(LOG), "-o", str(fifo))
    out, _ = reader.communicate(timeout=60)
    assert r.returncode == 0, r.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode) and json.loads(out)["kind"] == "commcost-profile"


def test_write_atomic_leaves_no_temporary_file(tmp_path):
    write_atomic(tmp_path / "a.txt", "one\n")
    write_atomic(tmp_path / "a.txt", "two\n")
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"] and (tmp_path / "a.txt").read_text() == "two\n"


def test_write_failure_names_the_target_not_the_temporary_file(tmp_path):
    # a write that fails (here: the directory went away) used to name ".x.abc123.tmp"
    target = tmp_path / "gone" / "rows.csv"
    with pytest.raises(OSError) as exc:
        write_atomic(target, "x\n")
    assert exc.value.filename == str(target)


@pytest.mark.parametrize("old, new, column", [("    33554432", "1" + "0" * 180, "size"), ("267.9", "9" * 200, "time")])
def test_nccl_tests_row_with_a_huge_number_is_one_short_line(tmp_path, old, new, column):
    # a 181-digit size used to reach the fit, whose error printed the size as 180 digits of TB
    lines = LOG.read_text().splitlines()
    lines[59] = lines[59].replace(old, new, 1)  # line 60: the 32 MiB row
    log = tmp_path / "all_reduce_perf.log"
    log.write_text("\n".join(lines) + "\n")
    line = one_error_line(run_commcost("fit", str(log)))
    assert line.startswith(f"commcost: error: {log}:60: {column} must be a finite number in [0, ")
    assert f"({len(new)} characters)" in line and len(line) < 250


def test_format_bytes_never_prints_a_wall_of_digits():
    from commcost.core.units import format_bytes

    assert format_bytes(1e180) == "1e+180 B"           # was "1000...000.00 TB" (169 digits)
    assert format_bytes(9.99e17) == "999000.00 TB"     # below 1e18 B: unchanged
    assert format_bytes(2.6e9) == "2.60 GB"
