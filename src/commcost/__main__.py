"""``python -m commcost``."""

import sys

from commcost.cli import main

sys.exit(main())
