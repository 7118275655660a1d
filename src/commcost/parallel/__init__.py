"""Parallel layouts and the collectives each parallel dimension issues per step.

:mod:`~commcost.parallel.layout` holds the layout (dp, tp, pp, vp, cp, ep, ZeRO stage) and places
its groups on the nodes; :mod:`~commcost.parallel.tensor`, :mod:`~commcost.parallel.pipeline`,
:mod:`~commcost.parallel.context`, :mod:`~commcost.parallel.expert`, :mod:`~commcost.parallel.ddp`
and :mod:`~commcost.parallel.zero` list, as data (:class:`~commcost.parallel.layout.CommOp`), the
collectives one GPU issues per optimizer step. Pricing them is the CommModel's job, overlapping
them the step's (:mod:`commcost.analyses.plan.plan`).
"""
