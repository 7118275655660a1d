"""PyTorch profiler (Kineto) traces in: measured overlap, exposed communication, stragglers.

* :mod:`commcost.trace.reader` streams a trace's events (``.json``/``.json.gz``);
* :mod:`commcost.trace.classify` says what each event is;
* :mod:`commcost.trace.load` keeps what the analysis needs (:class:`RankTrace`, seconds);
* :mod:`commcost.trace.intervals` unions, intersections, differences;
* :mod:`commcost.trace.analysis` compute, communication, exposed, overlap, idle per rank and step;
* :mod:`commcost.trace.collectives` each recorded collective with bytes, time, algbw, busbw,
  priced by a CommModel, and saved as a measurement ``commcost fit`` reads.
"""

from __future__ import annotations

__all__ = ["analyze_trace"]


def analyze_trace(path, **kwargs):
    """:func:`commcost.trace.summary.analyze_trace` (imported lazily)."""
    from commcost.trace.summary import analyze_trace as run

    return run(path, **kwargs)
