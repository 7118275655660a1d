"""PyTorch profiler (Kineto) traces in: measured overlap, exposed communication, stragglers.

* :mod:`commcost.trace.reader` streams a trace's events (``.json``/``.json.gz``);
* :mod:`commcost.trace.classify` says what each event is;
* :mod:`commcost.trace.load` keeps what the analysis needs (:class:`RankTrace`, seconds);
* :mod:`commcost.trace.intervals` unions, intersections, differences;
* :mod:`commcost.trace.analysis` compute, communication, exposed, overlap, idle per rank and step;
* :mod:`commcost.trace.collectives` each recorded collective with bytes, time, algbw, busbw,
  and saved as a measurement ``commcost fit`` reads;
* :mod:`commcost.trace.parallel` each rank's file as an independent task (serial, local processes, Dask);
* :mod:`commcost.trace.cross_rank` clock offsets across ranks, wait vs transfer per collective instance;
* :mod:`commcost.trace.advice` what to change, with the time per step it could win;
* :mod:`commcost.trace.summary` the one entry point, :func:`~commcost.trace.summary.analyze_trace`
  (also ``commcost.analyze_trace``), and the CommModel's prediction of each collective.

The core stays standard-library only (Dask, for ``--scheduler``, is an optional extra imported when
asked for); HTA (the reference it is checked against) is test-only.
"""

__all__: list[str] = []
