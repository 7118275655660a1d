"""Every ``--model`` flag reads the one model registry (``hardware/registry.py``): an alias of
``MODEL_ALIASES`` gives the same report as its registry key, in ``plan`` as in ``budget`` and ``timeline``."""

from __future__ import annotations

import pytest

from commcost.hardware.registry import MODEL_ALIASES
from conftest import run_commcost, strict_json

COMMANDS = {
    "plan": ("plan", "--system", "dgx-h100", "--gpus", "8", "--tp", "8", "--global-batch", "64"),
    "budget": ("budget", "--gpus", "32", "--bw", "25", "--latency", "20", "--step-ms", "400"),
    "timeline": ("timeline", "--gpus", "32", "--bw", "25", "--latency", "20", "--step-ms", "400"),
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_alias_7b_is_llama2_7b_everywhere(command):
    assert MODEL_ALIASES["7b"] == "llama2-7b"
    by_key = run_commcost(*COMMANDS[command], "--model", "llama2-7b", "--json")
    by_alias = run_commcost(*COMMANDS[command], "--model", "7b", "--json")
    assert by_key.returncode == 0, by_key.stderr
    assert by_alias.returncode == 0, by_alias.stderr
    assert strict_json(by_alias.stdout) == strict_json(by_key.stdout)
