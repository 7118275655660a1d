"""Activation offloading to host memory: Megatron-Core's ``cpu_offloading`` with ``cpu_offloading_num_layers = N``
(Megatron-Bridge ``model.cpu_offloading_num_layers``), which runs Transformer Engine's CPU offload context.

**Memory.** Of the ``L`` layers whose activations one micro-batch saves for its backward, the first ``N`` are
copied to pinned host memory after their forward and copied back before their backward. Transformer Engine
schedules layer ``i``'s copy out to finish before layer ``L - N + i``'s forward and its copy back to start at
layer ``L - 1 - N + i``'s backward, so that the GPU holds at most the activations of

    ``L_res = L - N``

layers at any moment (``transformer_engine/pytorch/cpu_offload.py``, ``OffloadSynchronizer``: "peak memory
usage of saving activations is (num_layers - num_offloaded_layers) * T"). The host holds ``N A`` bytes per GPU
(``A`` one layer's saved activations, :func:`commcost.workload.memory.layer_activation_bytes` without
recomputation); host memory is not checked.

**Time.** The copies run on a stream of their own beside the compute, device to host during the forward and
host to device during the backward, each over the GPU's host link in one direction (``B_h``,
``gpus.json`` ``host_link_bytes_per_s``: PCIe x16, or NVLink-C2C on Grace systems). Per micro-batch the step
waits for what the pass it overlaps cannot hide:

    ``t_off = max(0, N A / B_h - t_fwd) + max(0, N A / B_h - t_bwd)``

(the HBM traffic of the copies and host-memory contention are not modelled).

**Rules** (Megatron-Core ``TransformerConfig.__post_init__``): ``0 <= N < L``; no pipeline parallelism
("Currently there is no support for Pipeline parallelism with CPU offloading"); no activation recomputation
("CPU offloading does not work when activation recomputation is enabled").
"""

from __future__ import annotations

from commcost.core.errors import InputError
from commcost.hardware.registry import gpus

__all__ = ["check_cpu_offload", "resident_layers", "offload_exposed_s", "host_link_bytes_per_s"]


def check_cpu_offload(offloaded_layers: int, *, layers: int, pp: int, recompute: str) -> None:
    """Megatron-Core's rules for ``N`` offloaded layers (module docstring); ``N = 0`` always passes."""
    if isinstance(offloaded_layers, bool) or not isinstance(offloaded_layers, int) or offloaded_layers < 0:
        raise InputError(f"offloaded layers must be a whole number >= 0, got {offloaded_layers!r}")
    if offloaded_layers == 0:
        return
    if offloaded_layers >= layers:
        raise InputError(f"CPU offloading can offload at most {layers - 1} of the {layers} layers, "
                         f"got {offloaded_layers}")
    if pp > 1:
        raise InputError(f"CPU offloading does not run with pipeline parallelism (Megatron-Core), got pp = {pp}")
    if recompute != "none":
        raise InputError(f"CPU offloading does not run with activation recomputation (Megatron-Core), "
                         f"got recompute {recompute}")


def resident_layers(in_flight_layers, offloaded_layers):
    """``L_res = L - N``: layers' worth of a micro-batch's activations on the GPU at the peak. Array-safe."""
    return in_flight_layers - offloaded_layers


def offload_exposed_s(xp, *, offloaded_bytes, host_bytes_per_s, forward_s, backward_s):
    """``max(0, Q / B_h - t_fwd) + max(0, Q / B_h - t_bwd)`` per micro-batch, ``Q = N A`` the bytes
    offloaded (module docstring). Array-safe; 0 when ``Q = 0``."""
    copy = offloaded_bytes / host_bytes_per_s
    return xp.maximum(0.0, copy - forward_s) + xp.maximum(0.0, copy - backward_s)


def host_link_bytes_per_s(gpu: str) -> float:
    """``B_h``: GPU ``gpu``'s link to host memory, one direction (``gpus.json`` ``host_link_bytes_per_s``)."""
    row = gpus().get(gpu, {})
    value = row.get("host_link_bytes_per_s")
    if value is None:
        raise InputError(f"GPU {gpu!r} has no host link bandwidth in gpus.json: CPU offloading cannot be priced on it")
    return float(value)
