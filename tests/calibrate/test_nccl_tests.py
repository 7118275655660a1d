"""The nccl-tests log reader, driven by real logs in tests/data/nccl_tests/ (sources in tests/data/SOURCES.md)."""

from __future__ import annotations

import pytest

from commcost.calibrate.nccl_tests import collective_from_name, parse_nccl_tests, read_nccl_tests
from commcost.comm.collectives import Collective, bus_bandwidth_factor
from commcost.core.errors import InputError
from conftest import DATA

LOGS = DATA / "nccl_tests"
REAL = sorted(LOGS.glob("*.log"))

# (file, ranks, nodes, rows, first device, smallest size, largest size)
EXPECTED = {
    "h100_nvlink_1node_8gpu_all_reduce.log": (8, 1, 32, "NVIDIA H100 80GB HBM3", 8, 17179869184),
    "h100_ib_2node_16gpu_all_reduce.log": (16, 2, 32, "NVIDIA H100 80GB HBM3", 8, 17179869184),
    "mi300x_roce_2node_16gpu_all_reduce.log": (16, 2, 32, "AMD Instinct MI300X", 8, 17179869184),
    "h100_tcpxo_2node_16gpu_all_reduce.log": (16, 2, 31, "NVIDIA H100 80GB HBM3", 8, 8589934592),
}


def test_every_data_file_is_expected_and_names_its_source():
    assert {p.name for p in REAL} == set(EXPECTED)
    sources = (DATA / "SOURCES.md").read_text()
    for path in REAL:
        first = path.read_text().splitlines()[0]
        assert first.startswith("# source: "), path.name
        assert path.name in sources, path.name


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_log_header_devices_and_rows(path):
    gpus, nodes, n_rows, device, smallest, largest = EXPECTED[path.name]
    (run,) = read_nccl_tests(path)
    assert run.op is Collective.ALL_REDUCE  # from the file name: these logs do not print it
    assert (run.gpus, run.nodes, len(run.rows)) == (gpus, nodes, n_rows)
    assert run.devices[0] == device and len(run.devices) == gpus
    assert (run.threads, run.gpus_per_thread) == (1, 1)
    assert run.rows[0].size_bytes == smallest and run.rows[-1].size_bytes == largest
    sizes = [r.size_bytes for r in run.rows]
    assert sizes == sorted(sizes) and all(b == 2 * a for a, b in zip(sizes, sizes[1:]))  # -f 2 sweep


@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_log_columns_are_self_consistent(path):
    """Cross-check two derivations: algbw = size/time, busbw = algbw * 2(n-1)/n (nccl-tests PERFORMANCE.md)."""
    (run,) = read_nccl_tests(path)
    factor = bus_bandwidth_factor(Collective.ALL_REDUCE, run.gpus)
    assert run.rows
    for row in run.rows:
        for t in (row.out_of_place, row.in_place):
            assert t is not None
            if t.algbw_bytes_per_s < 10e9:  # printed with 2 decimals in GB/s: too coarse below 10 GB/s
                continue
            assert row.size_bytes / t.time_s == pytest.approx(t.algbw_bytes_per_s, rel=0.01)
            assert t.algbw_bytes_per_s * factor == pytest.approx(t.busbw_bytes_per_s, rel=0.01)


def test_nvlink_row_values_in_si_units():
    (run,) = read_nccl_tests(LOGS / "h100_nvlink_1node_8gpu_all_reduce.log")
    row = next(r for r in run.rows if r.size_bytes == 2**30)
    # "1073741824  268435456  float  sum  -1  4029.4  266.48  466.33  0  4016.4  267.34  467.85  0"
    assert row.count == 268435456 and row.dtype == "float" and row.redop == "sum" and row.root == -1
    assert row.out_of_place.time_s == pytest.approx(4029.4e-6)  # us -> s
    assert row.out_of_place.algbw_bytes_per_s == pytest.approx(266.48e9)  # GB/s is 1e9
    assert row.out_of_place.busbw_bytes_per_s == pytest.approx(466.33e9)
    assert row.in_place is not None and row.in_place.time_s == pytest.approx(4016.4e-6)
    assert row.out_of_place.wrong == "0"
    assert run.avg_busbw_bytes_per_s == pytest.approx(159.151e9)
    assert run.hosts == ("pool0-01806",)


def test_launcher_chatter_and_versions_are_tolerated():
    # The IB log has mpirun's xpmem warning and "[host:pid] ..." lines around the header,
    # and "NCCL version 2.26.2+cuda12.8"; the MI300X log has "RCCL version : ..." lines.
    (ib,) = read_nccl_tests(LOGS / "h100_ib_2node_16gpu_all_reduce.log")
    (amd,) = read_nccl_tests(LOGS / "mi300x_roce_2node_16gpu_all_reduce.log")
    assert ib.library_version == "2.26.2+cuda12.8"
    assert amd.library_version == "2.22.3-HEAD:7d8d67c"
    assert amd.hosts == ("gpu-53", "gpu-56")


def test_several_runs_concatenated():
    a = (LOGS / "h100_nvlink_1node_8gpu_all_reduce.log").read_text()
    b = (LOGS / "h100_ib_2node_16gpu_all_reduce.log").read_text()
    runs = parse_nccl_tests(a + "\n" + b, source="cat.log")
    assert [r.gpus for r in runs] == [8, 16]
    assert [len(r.rows) for r in runs] == [32, 32]
    assert runs[1].first_line > runs[0].rows[-1].line


# Older layout (no redop or root column, "error" instead of "#wrong"), named by the command line above it.
# The two rows and the command are quoted from https://github.com/NVIDIA/nccl/issues/340 (NCCL 2.6.4,
# 2 GPUs); the device lines are written here in that version's layout.
OLD_LAYOUT = """\
./broadcast_perf -b 8 -e 128M -f 2 -g 2
# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#
# Using devices
#   Rank  0 Pid  12345 on   desktop device  0 [0x01] GeForce RTX 2080 Ti
#   Rank  1 Pid  12345 on   desktop device  1 [0x02] GeForce RTX 2080 Ti
#
#                                             out-of-place                       in-place
#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)            (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
    16777216       2097152   float    418.5   20.05   20.05  0e+00    414.0   20.26   20.26  0e+00
    33554432       4194304   float    817.8   20.51   20.51  0e+00    785.1   21.37   21.37  0e+00
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 6.6972
"""


def test_older_layout_without_root_and_redop():
    (run,) = parse_nccl_tests(OLD_LAYOUT)
    assert run.op is Collective.BROADCAST  # from the command line above the header
    assert run.gpus == 2 and run.nodes == 1 and run.gpus_per_thread == 2
    row = run.rows[1]
    assert row.redop is None and row.root is None and row.out_of_place.wrong == "0e+00"
    assert row.out_of_place.time_s == pytest.approx(817.8e-6)
    assert row.in_place is not None and row.in_place.busbw_bytes_per_s == pytest.approx(21.37e9)


def test_collective_named_by_concluded_line_and_na_in_place():
    # First row: sendrecv_perf on 8 A100 (a public README quoting nccl-tests, in-place "#wrong" N/A);
    # the second row, with N/A times, is written here to exercise a placement that was not run.
    text = """\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
   134217728      33554432     float     sum      -1   1211.2  110.81  110.81      0   1211.8  110.76  110.76    N/A
   268435456      67108864     float     sum      -1   2280.0  117.73  117.73      0      N/A     N/A     N/A    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 114.0
# Collective test concluded: sendrecv_perf
"""
    (run,) = parse_nccl_tests(text)
    assert run.op is Collective.SEND_RECV
    assert run.gpus is None  # no "Using devices" block: the caller must say --gpus
    assert run.rows[0].in_place is not None and run.rows[0].in_place.wrong == "N/A"
    assert run.rows[1].in_place is None


@pytest.mark.parametrize("text,expected", [
    ("all_reduce_perf", Collective.ALL_REDUCE), ("./build/all_gather_perf_mpi -b 8", Collective.ALL_GATHER),
    ("reduce_scatter_perf", Collective.REDUCE_SCATTER), ("reduce_perf", Collective.REDUCE),
    ("alltoall_perf", Collective.ALL_TO_ALL), ("h100_allreduce.log", Collective.ALL_REDUCE),
    ("cluster.log", None),
])
def test_collective_from_name(text, expected):
    assert collective_from_name(text) is expected


@pytest.mark.parametrize("text,fragment", [
    ("", "empty file"),
    ("   \n\n", "empty file"),
    ("op,size_bytes,time_s\nall_reduce,1024,1e-5\n", "x.log:1: not nccl-tests output: 'op,size_bytes,time_s'"),
    ("# just a comment\nhello world\n", "x.log:2: not nccl-tests output: 'hello world'"),
    ("# only comments\n#\n", "no *_perf table"),
])
def test_not_nccl_tests_output_names_the_line(text, fragment):
    with pytest.raises(InputError) as exc:
        parse_nccl_tests(text, source="x.log")
    assert fragment in str(exc.value)


def test_garbage_inside_a_table_names_the_line():
    good = (LOGS / "h100_nvlink_1node_8gpu_all_reduce.log").read_text().splitlines()
    bad = good[:20] + ["this line is not part of the table"] + good[20:]
    with pytest.raises(InputError, match=r"x.log:21: not a nccl-tests row: expected 13 columns"):
        parse_nccl_tests("\n".join(bad), source="x.log")
    bad = good[:20] + ["     1048576        262144     float     sum      -1    fast   38.31   67.04      0"
                       "    26.93   38.94   68.14      0"] + good[20:]
    with pytest.raises(InputError, match=r"x.log:21: not nccl-tests output: time 'fast' is not a number"):
        parse_nccl_tests("\n".join(bad), source="x.log")


def test_nccl_info_lines_inside_a_table_are_skipped():
    good = (LOGS / "h100_nvlink_1node_8gpu_all_reduce.log").read_text().splitlines()
    noisy = good[:20] + ["host:880:880 [1] NCCL INFO comm 0x55 rank 0 nranks 2 - Destroy COMPLETE"] + good[20:]
    (run,) = parse_nccl_tests("\n".join(noisy))
    assert len(run.rows) == 32


def test_directory_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="is a directory"):
        read_nccl_tests(tmp_path)
