"""report/_choice.py: the algorithm's choice in words."""

from __future__ import annotations

from commcost.comm.collectives import AlgorithmChoice, Algorithm, ChoiceKind, Collective, CollectiveCost
from commcost.report._choice import reason_text


def _cost(choice):
    return CollectiveCost(op=Collective.ALL_REDUCE, algorithm=Algorithm.TREE, gpus=16, message_bytes=1e6,
                          latency_s=1e-4, bandwidth_s=2e-4, choice=choice)


def test_fastest_names_the_runner_up_and_both_sums():
    ch = AlgorithmChoice(kind=ChoiceKind.FASTEST, backend="nccl", ranked=(Algorithm.TREE, Algorithm.RING),
                         runner_up_latency_s=3e-4, runner_up_bandwidth_s=2e-4)
    # runner-up 0.3 ms + 0.2 ms = 0.5 ms; the winner 0.1 ms + 0.2 ms = 0.3 ms
    text = reason_text(_cost(ch))
    assert text.startswith("fastest of tree, ring (nccl); runner-up ring ")
    assert "500.00 us" in text and "300.00 us" in text


def test_only_names_the_backend_and_op_and_none_is_empty():
    assert reason_text(_cost(AlgorithmChoice(kind=ChoiceKind.ONLY, backend="gloo"))) == \
        "the only algorithm gloo runs for all_reduce here"
    assert reason_text(_cost(None)) == ""
