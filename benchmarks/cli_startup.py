"""Start-up cost of the drill command against a bare interpreter, and of ``commcost plan`` against numpy.

Runs ``python -c pass`` and the drill's first command alternately, several times
in one process, and prints the median wall time of each and their ratio.
Target: ratio <= 2.0 (the brief: at most 2x `python -c pass`; the core imports nothing heavy).

Then the README's first plan example (``commcost plan --model llama3-70b ...``, start to finish)
against ``python -c "import numpy"`` with the same interpreter, run in pairs the same way:
target ratio <= 1.25 (issue 37: plan imports only what it uses; the sensitivity table is asked
for with ``--sensitivity``). The machine's core count is printed with the figures: on a machine
shared with other work the paired ratio (each plan run over the numpy run beside it) is the figure
to read.

Also printed, as a reference line: ``python -c "import argparse, dataclasses"``,
the floor every commcost command stands on (argparse for the flags, dataclasses
for the frozen inputs and results STYLE.md asks for).

Wall time on a shared machine is noisy, so when ``valgrind`` is installed the
same commands are also run once each under ``valgrind --tool=callgrind`` and the
instructions they execute are compared (deterministic to ~0.1%; it counts the
interpreter's own start-up, ``site`` and its ``.pth`` files included, so the
ratio depends on the interpreter: a bare venv starts in far fewer instructions
than a system Python whose ``site-packages`` holds ``.pth`` files).

Byte code: the first step is ``python -m compileall -q src``. An installed
package has its ``.pyc`` files; a checkout run with ``PYTHONDONTWRITEBYTECODE=1``
(or on a read-only tree) would otherwise compile every module on every run.

    python benchmarks/cli_startup.py [--runs 21] [--no-instructions] [--only drill|plan]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DRILL = [str(ROOT / "tools" / "collective_cost.py"), "--gpus", "32", "--bw", "25", "--latency", "20",
         "--params", "1.3", "--step-ms", "400", "--buckets", "1,8,16,25,100"]
BARE = ["-c", "pass"]
FLOOR = ["-c", "import argparse, dataclasses"]
TARGET_RATIO = 2.0
PLAN = ["-m", "commcost", "plan", "--model", "llama3-70b", "--system", "dgx-h100", "--gpus", "1024",
        "--global-batch", "1024", "--tp", "8", "--pp", "4", "--vp", "5", "--zero", "1"]
"""The README's first ``commcost plan`` example."""
NUMPY = ["-c", "import numpy"]
PLAN_TARGET_RATIO = 1.25


def _env() -> dict[str, str]:
    """The environment of every run: this checkout's ``src`` first on the path (so ``-m commcost`` runs
    the code beside this benchmark, installed or not)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _time(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, *args], check=True, stdout=subprocess.DEVNULL, env=_env())
    return time.perf_counter() - t0


def _cores() -> str:
    """``N cores (M usable by this process)``."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{os.cpu_count()} cores ({usable} usable by this process)"


def _instructions(args: list[str]) -> int:
    """Instructions executed by ``python args`` (callgrind's "Collected" total)."""
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, *args],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env())
    m = re.search(r"Collected\s*:\s*(\d+)", r.stderr)
    if m is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{r.stderr[-2000:]}")
    return int(m.group(1))


def plan_startup(runs: int, instructions: bool) -> None:
    """The README's first plan example against ``python -c "import numpy"``, in pairs (module docstring)."""
    numpy, plan = [], []
    for _ in range(runs):  # interleaved, so machine noise hits both alike
        numpy.append(_time(NUMPY))
        plan.append(_time(PLAN))
    n, p = statistics.median(numpy), statistics.median(plan)
    paired = statistics.median(x / y for x, y in zip(plan, numpy))
    print(f"python -c 'import numpy'       median {n * 1e3:7.1f} ms over {runs} runs")
    print(f"commcost plan (README's first) median {p * 1e3:7.1f} ms")
    print(f"plan / numpy                   {p / n:.2f}x (median of paired runs {paired:.2f}x; "
          f"target <= {PLAN_TARGET_RATIO}x): {'OK' if paired <= PLAN_TARGET_RATIO else 'OVER'}")
    if instructions and shutil.which("valgrind") is not None:
        i_n, i_p = _instructions(NUMPY), _instructions(PLAN)
        print(f"instructions (callgrind)       numpy {i_n / 1e6:.1f}M, plan {i_p / 1e6:.1f}M ({i_p / i_n:.2f}x)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--no-instructions", action="store_true", help="skip the valgrind instruction count")
    ap.add_argument("--only", choices=("drill", "plan"), help="measure one of the two (default both)")
    opts = ap.parse_args()
    runs = opts.runs
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "src")], check=True)
    print(f"interpreter {sys.executable} (byte code compiled first: python -m compileall -q src); {_cores()}")
    if opts.only != "drill":
        plan_startup(runs, not opts.no_instructions)
        if opts.only == "plan":
            return 0
    bare, floor, drill = [], [], []
    for _ in range(runs):  # interleaved, so machine noise hits all alike
        bare.append(_time(BARE))
        floor.append(_time(FLOOR))
        drill.append(_time(DRILL))
    b, f, d = statistics.median(bare), statistics.median(floor), statistics.median(drill)
    ratio = d / b
    paired = statistics.median(x / y for x, y in zip(drill, bare))
    print(f"python -c pass                 median {b * 1e3:7.1f} ms over {runs} runs")
    print(f"import argparse, dataclasses   median {f * 1e3:7.1f} ms  ({f / b:.2f}x: the floor)")
    print(f"drill command                  median {d * 1e3:7.1f} ms")
    print(f"wall ratio                     {ratio:.2f}x (median of paired runs {paired:.2f}x; "
          f"target <= {TARGET_RATIO}x): {'OK' if ratio <= TARGET_RATIO else 'OVER'}")
    if opts.no_instructions:
        return 0
    if shutil.which("valgrind") is None:
        print("instructions: valgrind not installed, skipped")
        return 0
    ib, i_f, i_d = _instructions(BARE), _instructions(FLOOR), _instructions(DRILL)
    print(f"instructions (callgrind)       pass {ib / 1e6:.1f}M, floor {i_f / 1e6:.1f}M ({i_f / ib:.2f}x), "
          f"drill {i_d / 1e6:.1f}M")
    print(f"instruction ratio              {i_d / ib:.2f}x; above the floor: {(i_d - i_f) / 1e6:.1f}M "
          f"({(i_d - i_f) / ib:.2f}x of a bare start)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
