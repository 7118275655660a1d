"""The ranges the library accepts, once: the command line's flags hold the same ones.

A quantity outside its range is refused with :class:`commcost.core.errors.InputError` naming it and
the range, at the library's edge (a dataclass's ``__post_init__``, a public function's first lines),
so a notebook user gets the refusal the CLI gives, never ``inf``, a negative size or minutes of work.
Each bound is far beyond any real job and keeps every product of them finite in float64
(``max`` ~1.8e308): the largest step, 1e16 tokens at 1e-9 tokens/s/GPU on 10**6 GPUs, stays below 1e40.
"""

from __future__ import annotations

__all__ = ["MAX_GPUS", "MAX_NODES", "MAX_GLOBAL_BATCH", "MAX_SEQ", "MAX_TRAIN_TOKENS",
           "MAX_PRICE_PER_GPU_HOUR", "MAX_MESSAGE_BYTES", "MAX_BUCKET_CAPS", "MAX_REGIMES"]

MAX_GPUS = 10**6
"""GPUs in one job (the largest published runs use ~10**5)."""
MAX_NODES = 10**6
"""Nodes in one job: a node holds at least one GPU, so at most :data:`MAX_GPUS` (``--nodes``, typed by
a user, is held tighter, to 100,000; a search of 10**6 GPUs on 8-GPU nodes spans 125,000)."""
MAX_GLOBAL_BATCH = 10**7
"""Sequences per optimizer step (its divisors are a search's micro-batch choices)."""
MAX_SEQ = 10**8
"""Tokens per sequence."""
MAX_TRAIN_TOKENS = 1e16
"""Tokens a training run is priced for (the largest published runs train on ~1.5e13-3.6e13)."""
MAX_PRICE_PER_GPU_HOUR = 1e4
"""Dollars per GPU-hour (cloud prices are 1-10)."""
MAX_MESSAGE_BYTES = 2.0**60
"""Bytes in one collective call or one gradient (1 EiB)."""
MAX_BUCKET_CAPS = 10_000
"""Bucket caps one sweep simulates (each is one DDP timeline)."""
MAX_REGIMES = 100
"""Size regimes one alpha-beta fit may split a series into."""
