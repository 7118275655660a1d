"""AMD Instinct kernel rates (hardware/kernels.json, compute.json): each constant against the public
measurement it comes from, worked by hand, and the MI325X preset that amdpt's MI325X rows need."""

from __future__ import annotations

import pytest

from commcost.hardware.registry import kernels
from commcost.workload.compute import peak_flops_per_s
from commcost.workload.operators import kernel_rates
from commcost.workload.stacks import stack

PEAK_BF16 = 1307.4e12   # MI300X / MI325X datasheets: BF16 1,307.4 TFLOPS dense
PEAK_FP8 = 2614.9e12    # FP8 2,614.9 TFLOPS dense


def row(gpu: str) -> dict:
    return kernels()["gpus"][gpu]


def test_mi325x_has_the_mi300x_peaks():
    # the same CDNA 3 die (304 CUs at 2,100 MHz peak): 304 x 2,048 (BF16 FLOP/CU/clock) x 2.1e9 = 1.3074e15
    assert 304 * 2048 * 2.1e9 == pytest.approx(PEAK_BF16, rel=1e-4)
    for gpu in ("mi300x", "mi325x"):
        assert peak_flops_per_s(gpu, "bf16") == PEAK_BF16
        assert peak_flops_per_s(gpu, "fp8") == PEAK_FP8


@pytest.mark.parametrize("gpu, bf16_tflops, fp8_tflops", [
    ("mi300x", 708.0, 1273.0),    # AMD MAF table 1 (ROCm 6.3.0, hipBLASLt db8e93b): MI300X 750 W
    ("mi325x", 843.0, 1519.0),    # MI325X 1,000 W
])
def test_gemm_efficiency_is_amds_max_achievable_flops_over_the_peak(gpu, bf16_tflops, fp8_tflops):
    # MI300X: 708 / 1,307.4 = 0.5415 -> 0.54; 1,273 / 2,614.9 = 0.4868 -> 0.49
    # MI325X: 843 / 1,307.4 = 0.6448 -> 0.64; 1,519 / 2,614.9 = 0.5809 -> 0.58
    eta = row(gpu)["gemm_efficiency"]
    assert eta["bf16"] == pytest.approx(bf16_tflops * 1e12 / PEAK_BF16, abs=0.005)
    assert eta["fp8"] == pytest.approx(fp8_tflops * 1e12 / PEAK_FP8, abs=0.005)


def test_mi300x_attention_is_the_ck_v3_kernels_measured_at_8k():
    # ROCm/aiter mha README, MI300X, causal, d 128, 32/8 heads, s 8,192: fwd 547.1 (b4), 537.4 (b8) -> ~540;
    # bwd (fp32 dQ atomics) 422.8 (b4), 441.4 (b8) -> ~430 TFLOP/s. The curve eta_max s/(s + 400) at 8,192:
    # 8,192/8,592 = 0.9534; 540e12 / 1,307.4e12 / 0.9534 = 0.4332; 430e12 / 1,307.4e12 / 0.9534 = 0.3450
    fwd, bwd = row("mi300x")["attention"]["fa2"]
    assert fwd == pytest.approx(0.433, abs=0.001)
    assert bwd == pytest.approx(0.345, abs=0.001)
    assert row("mi300x")["attention"]["fa3"] == [fwd, bwd]   # TE's CK fused attention: the same kernels


def test_mi300x_attention_curve_reproduces_the_4k_measurement():
    # the same table at s 4,096, b 8: fwd 513.1, bwd-a32 409.1. Curve: 4,096/4,496 = 0.9110;
    # 0.433 x 0.9110 x 1,307.4 = 515.7 (+0.5%); 0.345 x 0.9110 x 1,307.4 = 410.9 (+0.4%)
    fwd, bwd = row("mi300x")["attention"]["fa2"]
    s0 = kernels()["attention"]["seq_half_tokens"]
    factor = 4096 / (4096 + s0)
    assert fwd * factor * PEAK_BF16 == pytest.approx(513.1e12, rel=0.01)
    assert bwd * factor * PEAK_BF16 == pytest.approx(409.1e12, rel=0.01)


def test_mi325x_attention_is_mi300x_at_the_maf_clock_ratio():
    # BF16 MAF clocks: 1,447 MHz (MI325X) / 1,207 MHz (MI300X) = 1.1988; 0.433 x 1.1988 = 0.519, 0.345 x 1.1988 = 0.414
    ratio = 1447 / 1207
    f300, b300 = row("mi300x")["attention"]["fa2"]
    f325, b325 = row("mi325x")["attention"]["fa2"]
    assert f325 == pytest.approx(f300 * ratio, abs=0.001)
    assert b325 == pytest.approx(b300 * ratio, abs=0.001)


def test_math_kernel_is_h100s_share_of_the_large_gemm():
    # H100: math 0.50 / GEMM 0.74 = 0.676; MI300X 0.676 x 0.54 = 0.365 -> 0.36; MI325X 0.676 x 0.64 = 0.432 -> 0.43
    share = row("h100-sxm")["attention"]["math"][0] / row("h100-sxm")["gemm_efficiency"]["bf16"]
    for gpu in ("mi300x", "mi325x"):
        assert row(gpu)["attention"]["math"][0] == pytest.approx(share * row(gpu)["gemm_efficiency"]["bf16"],
                                                                  abs=0.006)


def test_mi325x_rates_flow_into_the_operator_model():
    # u = u_gpu x u_stack (megatron: 1); GEMM fp8 rate = u x 2,614.9e12 x 0.58; attention peak = u x BF16 peak
    st = stack("megatron")
    r = kernel_rates("mi325x", "fp8", st)
    u = row("mi325x")["sustained"] * st.sustained
    assert r.gemm_flops_per_s == pytest.approx(u * PEAK_FP8 * 0.58)
    assert r.attention_peak_flops_per_s == pytest.approx(u * PEAK_BF16)
    assert (r.attention_forward_efficiency, r.attention_backward_efficiency) == (0.519, 0.414)
    assert r.sms == 304.0
