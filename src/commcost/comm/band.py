"""The uncertainty band of a preset-only prediction: the spread real clusters of its class show.

A preset gives one number, but measured clusters of the same hardware differ (NCCL version,
firmware, switch placement, routing). :func:`collective_band` turns a predicted time ``t`` into
``(r_lo t, r_hi t)``: the range the *measured* times of real tables of the same class fell in
around the preset's prediction. The classes and ratios are data
(``commcost/hardware/bands.json``), derived by ``benchmarks/derive_constants.py``:

    for every row of 1 MiB or more of the TUNING tables (tests/data/nccl_tests/split.json),
    r = t_measured / t_predicted (preset only, algorithm auto);
    per class, r_lo = 5th percentile of r and r_hi = 95th percentile of r.

Class = where the group lives: ``one_node``, ``multi_node`` (the group spans more than one node
of its topology, inside one pod) or ``multi_pod`` (it spans several pods of a three-tier topology,
multi-rack NVL72 beyond a scalable unit of 8 racks, where the spine's share is fitted on one table
and its rows are few: the band there is the spread of that one table's rows). Size
regimes are not separate classes: split by 1-64 MiB and > 64 MiB, the classes held 32-63 rows
and their percentiles moved by up to 0.07 between two model revisions (one_node/>64MiB p95 from
1.159 to 1.091), too unstable to publish; merged, they hold 74-102 rows. One ratio pair per class
also keeps both ends of the band monotone in size wherever the prediction is.
``benchmarks/accuracy_nccl_tests.py`` prints the band's coverage on the held-out tables, which
did not take part in the derivation.

The band describes NCCL/RCCL all-reduce on system presets. For other collectives and for
custom topologies it is the same ratios, applied as an indication only (no table checks them).
"""

from __future__ import annotations

from commcost.comm.collectives import CollectiveCost
from commcost.comm.topology import Link, Topology, as_topology, place
from commcost.errors import InputError
from commcost.hardware import load_preset_file

__all__ = ["collective_band", "band_class", "band_ratios"]


def band_ratios() -> dict[str, tuple[float, float]]:
    """``{class: (r_lo, r_hi)}`` from ``bands.json``."""
    table = load_preset_file("bands.json")
    return {k: (float(v["low_ratio"]), float(v["high_ratio"])) for k, v in table.items() if not k.startswith("_")}


def band_class(cost: CollectiveCost, topology: Topology | Link) -> str:
    """The class of ``cost``'s group on ``topology``: ``one_node``, ``multi_node`` or ``multi_pod``."""
    if not isinstance(cost, CollectiveCost):
        raise InputError(f"cost must be a CollectiveCost, got {type(cost).__name__}")
    topo = as_topology(topology, cost.gpus)
    pl = place(cost.gpus, topo)
    if pl.nodes == 1:
        return "one_node"
    return "multi_pod" if pl.pods > 1 else "multi_node"


def collective_band(cost: CollectiveCost, topology: Topology | Link | str) -> tuple[float, float]:
    """``(low_s, high_s)``: the range measured clusters of this class show around ``cost.total_s``.

    ``topology`` is the :class:`Topology` (or flat :class:`Link`) the cost was computed on, or a
    system preset's name (the group is then packed on full nodes of it). ``low = r_lo T`` and
    ``high = r_hi T`` with the class's ratios (module docstring); ``low <= T <= high`` whenever the
    ratios bracket 1, and both ends are monotone wherever T is.
    """
    if isinstance(topology, str):
        from commcost.presets import system_group

        topology = system_group(topology, gpus=cost.gpus)[0]
    r_lo, r_hi = band_ratios()[band_class(cost, topology)]
    return r_lo * cost.total_s, r_hi * cost.total_s
