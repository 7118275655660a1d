"""``commcost measure``: the size grid and config checks, and real gloo runs with 2 local ranks (torch-marked).

The gloo runs are kept small (sizes 16 KiB - 8 MiB, a few iterations) for a 2-core CI machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from commcost.calibrate.measure import MeasureConfig, size_grid
from commcost.comm.collectives import Collective
from commcost.core.errors import InputError
from conftest import ROOT

GLOO_R2_BOUND = 0.9
"""R^2 (on ln T) the fit of a real 2-rank gloo sweep must exceed. Why 0.9 and not 0.99: on a shared
2-core machine a rank can lose its core for a scheduler tick (~4 ms) in any call; the per-rank minimum
(--stat min) removes most of that, and the sweep spans ~25x in time, so 0.9 still fails any fit whose
shape is wrong (a straight line through flat data, a wrong bus factor) while tolerating scheduling noise."""


def commcost(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=str(ROOT / "src"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "commcost", *args], capture_output=True, text=True,
                          env=full, cwd=ROOT, timeout=timeout)


def leftovers(token: str) -> list[int]:
    """PIDs of live processes whose environment carries ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if token.encode() in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def test_size_grid():
    assert size_grid(1024, 8192) == (1024, 2048, 4096, 8192)
    assert size_grid(1000, 1e6, 10) == (1000, 10000, 100000, 1000000)
    assert size_grid(4096, 4096) == (4096,)
    with pytest.raises(InputError, match="0 < min <= max"):
        size_grid(2048, 1024)
    with pytest.raises(InputError, match="factor must be > 1"):
        size_grid(1, 8, 1.0)


@pytest.mark.parametrize("kwargs,fragment", [
    ({"backend": "mpi"}, "backend must be gloo or nccl"),
    ({"nproc": 1}, "at least 2 ranks"),
    ({"iters": 0}, "iters >= 1"),
    ({"dtype": "int8"}, "dtype must be one of"),
    ({"timeout_s": 0}, "timeout must be > 0"),
    ({"statistic": "p99"}, "statistic must be median, min or mean"),
])
def test_config_validation(kwargs, fragment):
    base = {"backend": "gloo", "ops": (Collective.ALL_REDUCE,), "sizes_bytes": (1024,)}
    with pytest.raises(InputError, match=fragment):
        MeasureConfig(**{**base, **kwargs})


def test_without_torch_one_line_install_hint(tmp_path):
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('no torch here')\n")
    env = dict(os.environ, PYTHONPATH=f"{tmp_path}{os.pathsep}{ROOT / 'src'}")
    r = subprocess.run([sys.executable, "-m", "commcost", "measure", "--sizes", "1KiB:4KiB"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["commcost: error: torch is not installed; install it with: "
                                             "pip install 'commcost[measure]'"]


@pytest.mark.torch
def test_gloo_two_ranks_measure_then_fit(tmp_path):
    pytest.importorskip("torch")
    # A real measurement on a shared 2-core machine can be disturbed by a neighbour: measure
    # again (up to twice; a CI run saw two disturbed sweeps in a row, r2 0.41) if a sweep's fit falls
    # under the bound; the bound itself stays.
    for attempt in range(3):
        result, r, out = _measure_and_fit(tmp_path / f"gloo{attempt}.csv")
        if result["r2"] > GLOO_R2_BOUND:
            break
    assert "size" in r.stdout and "busbw" in r.stdout and "(us)" in r.stdout  # nccl-tests' table shape
    text = out.read_text()
    assert text.startswith("# commcost-measurement version 1")
    for key in ("backend", "world_size", "nodes", "hosts", "torch_version", "date"):
        assert f"# {key}: " in text
    assert len([ln for ln in text.splitlines() if ln.startswith("all_reduce,")]) == 10  # 16 KiB .. 8 MiB
    assert (result["op"], result["gpus"]) == ("all_reduce", 2)
    assert result["r2"] > GLOO_R2_BOUND, result
    # loopback TCP between two processes: somewhere between 50 MB/s and 100 GB/s
    assert 50e6 < result["bandwidth_bytes_per_s"] < 100e9


def _measure_and_fit(out):
    r = commcost("measure", "--backend", "gloo", "--nproc", "2", "--ops", "all_reduce", "--sizes", "16KiB:8MiB",
                 "--warmup", "3", "--iters", "10", "--stat", "min", "-o", str(out))
    assert r.returncode == 0, r.stderr
    fit = commcost("fit", str(out), "--json")
    assert fit.returncode == 0, fit.stderr
    return json.loads(fit.stdout), r, out


@pytest.mark.torch
def test_dead_rank_is_named_and_rows_are_kept(tmp_path):
    pytest.importorskip("torch")
    out, token = tmp_path / "part.csv", uuid.uuid4().hex
    r = commcost("measure", "--backend", "gloo", "--ops", "all_reduce", "--sizes", "16KiB:256KiB", "--iters", "3",
                 "-o", str(out), env={"COMMCOST_MEASURE_FAULT": "die@1:65536", "COMMCOST_TEST_TOKEN": token})
    assert r.returncode == 1, (r.stdout, r.stderr)
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("commcost:")]  # the rest is the progress bar
    assert len(err) == 1 and "Traceback" not in r.stderr and r.stderr.strip().endswith(err[0])
    assert "rank 1 died" in err[0] and "all_reduce at 64.00 KiB (65536 B)" in err[0]
    assert f"2 completed row(s) kept in {out}" in err[0]
    rows = [ln for ln in out.read_text().splitlines() if ln.startswith("all_reduce,")]
    assert [int(ln.split(",")[2]) for ln in rows] == [16384, 32768]
    assert leftovers(token) == []


@pytest.mark.torch
def test_hung_rank_is_named_after_timeout(tmp_path):
    pytest.importorskip("torch")
    token = uuid.uuid4().hex
    r = commcost("measure", "--backend", "gloo", "--ops", "all_reduce", "--sizes", "16KiB:64KiB", "--iters", "3",
                 "--timeout", "3", env={"COMMCOST_MEASURE_FAULT": "hang@1:32768", "COMMCOST_TEST_TOKEN": token})
    assert r.returncode == 1, (r.stdout, r.stderr)
    err = [ln for ln in r.stderr.splitlines() if ln.startswith("commcost:")]
    assert len(err) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "rank 1 hung" in err[0] and "32.00 KiB" in err[0] and "3 s" in err[0]
    assert leftovers(token) == []


@pytest.mark.torch
def test_under_torchrun(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "run.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        "-m", "commcost", "measure", "--backend", "gloo", "--ops", "all_reduce,broadcast",
                        "--sizes", "16KiB:64KiB", "--iters", "3", "-o", str(out)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    data = json.loads(out.read_text())
    assert data["provenance"]["launcher"] == "torchrun" and data["provenance"]["world_size"] == 2
    assert [(row["op"], row["size_bytes"]) for row in data["rows"]] == [
        ("all_reduce", 16384), ("all_reduce", 32768), ("all_reduce", 65536),
        ("broadcast", 16384), ("broadcast", 32768), ("broadcast", 65536)]
    assert r.stdout.count("# all_reduce") == 1  # only rank 0 prints the table


def test_output_directory_must_exist(tmp_path):
    r = commcost("measure", "-o", str(tmp_path / "no" / "such" / "x.csv"))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"commcost: error: -o {str(tmp_path / 'no' / 'such' / 'x.csv')!r}: "
                                             f"directory {str(tmp_path / 'no' / 'such')!r} does not exist"]


def test_output_that_is_a_directory_is_refused_before_measuring(tmp_path):
    # used to fail after the run with the temp file's name (".x.abc123.tmp: Is a directory")
    r = commcost("measure", "-o", str(tmp_path))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"commcost: error: -o {str(tmp_path)!r} is a directory, "
                                             "expected a file name"]


def test_bad_size_range_is_one_line():
    r = commcost("measure", "--sizes", "64MiB:1KiB")
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["commcost: error: argument --sizes: range must go from small to "
                                             "large, got '64MiB:1KiB'"]
