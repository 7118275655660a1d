"""Measurement files and logs as load_series reads them (issue 24): pooled by size while streamed
(item 11), read strictly (item 13), integers past 4,300 digits named (item 7), unreadable files
named (item 16)."""

from __future__ import annotations

import json

import pytest

from commcost.calibrate import nccl_tests
from commcost.calibrate.data import load_series
from commcost.calibrate.fit import fit_alpha_beta
from commcost.core.errors import InputError
from conftest import DATA, run_commcost
from conftest import one_error_line

IB = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"


def _repeated_log(tmp_path, copies: int):
    """The IB log with its 32-row table repeated ``copies`` times inside one run (a long run of
    nccl-tests ``-n``/``-N`` repeats, or logs concatenated)."""
    lines = IB.read_text().splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if line.strip() and line.lstrip()[0].isdigit()]
    body = "".join(lines[rows[0]:rows[-1] + 1])
    path = tmp_path / "all_reduce_repeated.log"
    path.write_text("".join(lines[:rows[0]]) + body * copies + "".join(lines[rows[-1] + 1:]))
    return path


def test_repeated_sizes_are_pooled_as_they_stream(tmp_path):
    # item 11: 32 sizes x 500 copies = 16,000 rows are 32 samples (the median of each size's rows:
    # here all equal), so the fit costs what the 32-row log costs and gives the same model
    big = load_series(_repeated_log(tmp_path, 500))
    one = load_series(IB)
    assert (len(big.samples), big.rows) == (32, 32 * 500)
    assert sorted((s.size_bytes, s.time_s) for s in big.samples) == sorted((s.size_bytes, s.time_s) for s in one.samples)
    fit_big = fit_alpha_beta(big.samples, op=big.op, gpus=big.gpus)
    assert fit_big == fit_alpha_beta(one.samples, op=one.op, gpus=one.gpus)


def test_the_median_of_a_size_is_fitted(tmp_path):
    rows = [{"op": "all_reduce", "gpus": 4, "size_bytes": s, "count": s // 4, "dtype": "float32", "time_s": t,
             "time_min_s": t, "time_max_s": t, "algbw_bytes_per_s": 1.0, "busbw_bytes_per_s": 1.0, "iters": 1}
            for s, t in [(1024, 1e-5), (1024, 3e-5), (1024, 2e-5), (4096, 5e-5)]]
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"version": 1, "kind": "commcost-measurement", "provenance": {}, "rows": rows}))
    series = load_series(path)
    # median(10, 30, 20) us = 20 us; 4096 B measured once
    assert sorted((s.size_bytes, s.time_s) for s in series.samples) == [(1024, 2e-5), (4096, 5e-5)]
    assert series.rows == 4


def test_a_log_past_the_row_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(nccl_tests, "MAX_LOG_ROWS", 100)
    with pytest.raises(InputError, match="more than 100 rows"):
        load_series(_repeated_log(tmp_path, 4))


def _csv(tmp_path, **edit):
    row = {"op": "all_reduce", "gpus": "4", "size_bytes": "1024", "count": "256", "dtype": "float32",
           "time_s": "3e-05", "time_min_s": "2.9e-05", "time_max_s": "3.4e-05", "algbw_bytes_per_s": "3.4e7",
           "busbw_bytes_per_s": "5.1e7", "iters": "20"}
    second = dict(row, size_bytes="2048", count="512", time_s="4e-05")
    row.update(edit)
    path = tmp_path / "m.csv"
    path.write_text(",".join(row) + "\n" + ",".join(row.values()) + "\n" + ",".join(second.values()) + "\n")
    return path


@pytest.mark.parametrize("edit, words", [
    ({"gpus": "2.5"}, "column 'gpus' must be a whole number, got '2.5'"),       # it became 2
    ({"iters": "20.5"}, "column 'iters' must be a whole number"),
    ({"op": "allreduce_xx"}, "unknown collective 'allreduce_xx'"),             # it became all_reduce
    ({"op": "all_reduce2"}, "unknown collective 'all_reduce2'"),
])
def test_measurement_csv_is_read_strictly(tmp_path, edit, words):
    with pytest.raises(InputError, match=words.replace("(", r"\(")):
        load_series(_csv(tmp_path, **edit))


@pytest.mark.parametrize("name", ["AllReduce", "all-reduce", "allreduce", "all_reduce"])
def test_spellings_of_one_collective_are_accepted(tmp_path, name):
    assert load_series(_csv(tmp_path, op=name)).op.value == "all_reduce"


@pytest.mark.parametrize("column, value", [("type", "7"), ("redop", "1.5")])
def test_nccl_tests_rows_with_numbers_for_names_are_refused(tmp_path, column, value):
    # item 13: a row whose type/redop columns are numbers was taken as data
    text = IB.read_text()
    target = next(line for line in text.splitlines() if line.strip().startswith("1048576 "))
    tokens = target.split()
    tokens[2 if column == "type" else 3] = value
    path = tmp_path / "all_reduce.log"
    path.write_text(text.replace(target, "  ".join(tokens)))
    with pytest.raises(InputError, match=f"{column} '{value}' is a number, expected a name"):
        load_series(path)


def test_an_integer_past_the_digit_limit_names_the_field(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"version": 1, "kind": "commcost-measurement", "rows": [{"gpus": ' + "7" * 5000 + "}]}")
    with pytest.raises(InputError, match="m.json: field 'gpus' is an integer of more than 4300 digits"):
        load_series(path)


def test_an_unreadable_file_is_named():
    # item 16: reading /proc/self/mem fails with EIO, an error that carries no file name of its own
    line = one_error_line(run_commcost("fit", "/proc/self/mem"), code=1)
    assert line.startswith("commcost: error: /proc/self/mem: ")


def test_a_fifo_is_refused(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe")
    line = one_error_line(run_commcost("fit", str(tmp_path / "pipe")))
    assert "not a regular file" in line


def test_listed_nodes_is_the_one_node_count_the_log_names_for_the_series():
    from commcost.calibrate.data import Series
    from commcost.calibrate.fit import Sample
    from commcost.comm.collectives import Collective

    def series(runs):
        return Series(op=Collective.ALL_REDUCE, gpus=16, samples=(Sample(size_bytes=1.0, time_s=1.0),),
                      source_kind="nccl-tests", provenance={"runs": runs})

    two = {"gpus": 16, "nodes": 2}
    assert series([two, two]).listed_nodes == 2
    assert series([two, {"gpus": 8, "nodes": 1}]).listed_nodes == 2        # another group size's run: not this series
    assert series([two, {"gpus": 16, "nodes": 4}]).listed_nodes is None    # two counts: cannot tell
    assert series([{"gpus": 16, "nodes": None}]).listed_nodes is None      # no hosts listed
    assert series([]).listed_nodes is None
