"""``fit --progress``: a line at each tenth of a long log read (issue 36 item 11: a 100 MB log ran
65 s with no sign of life); none without the flag when stderr is not a terminal."""

from __future__ import annotations

from conftest import DATA, run_commcost


def test_fit_reports_each_tenth_of_the_log(tmp_path):
    text = (DATA / "nccl_tests" / "allgather_b200_vultr_2x8.txt").read_text()
    log = tmp_path / "allgather_big.txt"
    log.write_text(text * 20)
    r = run_commcost("fit", str(log), "--gpus", "16", "--progress", "--json")
    assert r.returncode == 0, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("commcost fit: allgather_big.txt: ")]
    # ten tenths, each line once, the last at 100%
    assert [x.split(": ")[2].split("%")[0] for x in lines] == [str(10 * k) for k in range(1, 11)]
    quiet = run_commcost("fit", str(log), "--gpus", "16", "--json")
    assert quiet.returncode == 0 and "read (" not in quiet.stderr
