"""A nccl-tests log row with a huge number (``calibrate/nccl_tests.py``) is one short line naming the file,
the line and the column."""

from __future__ import annotations

import pytest

from conftest import DATA, run_commcost
from conftest import one_error_line

LOG = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"


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
