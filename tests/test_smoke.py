"""The drill's first command runs from a fresh clone and prints every part."""

from conftest import run_tool


def test_drill_first_command_prints_parts_a_to_g():
    r = run_tool("--gpus", "32", "--bw", "25", "--latency", "20", "--params", "1.3",
                 "--step-ms", "400", "--buckets", "1,8,16,25,100")
    assert r.returncode == 0, r.stderr
    for part in ("(a)", "(b)", "(c)", "(d)", "(e)", "(f)", "(g)"):
        assert part in r.stdout
