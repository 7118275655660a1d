"""Start-up cost of the drill command against a bare interpreter.

Runs ``python -c pass`` and the drill's first command alternately, several times
in one process, and prints the median wall time of each and their ratio.
Target: ratio <= 1.3 (the core imports nothing heavy).

    python benchmarks/cli_startup.py [--runs 21]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DRILL = [str(ROOT / "tools" / "collective_cost.py"), "--gpus", "32", "--bw", "25", "--latency", "20",
         "--params", "1.3", "--step-ms", "400", "--buckets", "1,8,16,25,100"]
TARGET_RATIO = 1.3


def _time(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    runs = ap.parse_args().runs
    bare, drill = [], []
    for _ in range(runs):  # interleaved, so machine noise hits both alike
        bare.append(_time([sys.executable, "-c", "pass"]))
        drill.append(_time([sys.executable, *DRILL]))
    b, d = statistics.median(bare), statistics.median(drill)
    ratio = d / b
    print(f"python -c pass      median {b * 1e3:7.1f} ms over {runs} runs")
    print(f"drill command       median {d * 1e3:7.1f} ms over {runs} runs")
    print(f"ratio               {ratio:.2f}x (target <= {TARGET_RATIO}x): {'OK' if ratio <= TARGET_RATIO else 'OVER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
