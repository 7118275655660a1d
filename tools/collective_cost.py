#!/usr/bin/env python3
"""Drill 3's tool: ``python tools/collective_cost.py --gpus 32 --bw 25 --latency 20 ...``.

A thin shim that works from a fresh clone with nothing installed: it puts
``src/`` on the path and runs ``commcost budget``.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "src"))

from commcost.cli import budget_main  # noqa: E402

if __name__ == "__main__":
    sys.exit(budget_main())
