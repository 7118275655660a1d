"""The collective commands' request builder (:mod:`commcost.cli.inputs_comm`): refusals keep their messages."""

from __future__ import annotations

import pytest

from commcost.cli import collective
from commcost.cli.inputs_comm import collective_request
from commcost.core.errors import InputError
from conftest import parse_flags as _ns


def test_collective_request_needs_two_gpus():
    with pytest.raises(InputError, match="a collective needs at least 2 GPUs, got 1"):
        collective_request(_ns(collective, "--op", "all_reduce", "--size", "1MiB", "--gpus", "1", "--bw", "25",
                               "--latency", "5"))
