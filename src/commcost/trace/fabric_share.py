"""How fast the traced collectives ran against the fabric: the share of the modelled bus bandwidth achieved.

For each op, over its rows priced by the CommModel (:class:`commcost.trace.summary.Prediction`), with ``n_i`` the
calls of row ``i``, ``t_i`` its measured time and ``T_i`` the model's time on the fabric:

    share(op) = sum_i n_i T_i / sum_i n_i t_i

The bus bandwidth of a row is ``busbw = S/t * f(op, P)`` (nccl-tests PERFORMANCE.md), so at one size
``T/t = busbw_measured / busbw_fabric``; over several sizes the share weighs each by the time its calls
took: the fraction of the fabric's speed the op's traced calls got (a share of 9% means its calls took
11x what the fabric needs; waiting for late ranks is included where one rank is traced).
"""

from __future__ import annotations

__all__ = ["fabric_shares"]


def fabric_shares(predictions) -> dict[str, dict[str, float]]:
    """``{op: {"share": share, "measured_s": sum n t, "fabric_s": sum n T, "calls": sum n}}`` over the priced rows
    (module docstring), ops in name order; an op without a priced row or with no measured time is left out."""
    acc: dict[str, list[float]] = {}
    for p in predictions or ():
        if p.predicted_s is None or p.measured_s <= 0:
            continue
        a = acc.setdefault(p.row.op.value, [0.0, 0.0, 0.0])
        a[0] += p.row.count * p.measured_s
        a[1] += p.row.count * p.predicted_s
        a[2] += p.row.count
    return {op: {"share": f / m, "measured_s": m, "fabric_s": f, "calls": int(n)}
            for op, (m, f, n) in sorted(acc.items()) if m > 0}
