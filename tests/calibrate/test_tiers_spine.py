"""Cross-scale calibration on a three-tier preset: the spine's share is a fourth per-tier multiplier."""

from __future__ import annotations

import dataclasses

import pytest

from commcost import collective_cost
from commcost.core.errors import InputError
from commcost.calibrate.tiers import TierSample, fit_tiers, scaled_topology, tier_fit_from_dict, tier_fit_to_dict
from commcost.comm.systems import system_group

GiB = 2 ** 30
SIZES = (GiB // 4, GiB, 4 * GiB, 16 * GiB)


def _samples(nodes_list, m_s: float, s_e: float = 1.0):
    # synthetic "measurements": the preset's own model with the spine's oversubscription times m_s and
    # the NIC bandwidth times s_e; what the fit must recover
    out = []
    for nodes in nodes_list:
        topo, P = system_group("gb200-nvl72", nodes=nodes)
        truth = scaled_topology(topo, 1.0, s_e, 1.0, m_s)
        for S in SIZES:
            out.append(TierSample(nodes=nodes, gpus=P, message_bytes=S,
                                  time_s=collective_cost("all_reduce", S, P, truth).total_s))
    return out


def test_scaled_topology_scales_the_spine_and_keeps_it_non_blocking_at_least():
    topo, _ = system_group("gb200-nvl72", nodes=20)
    assert scaled_topology(topo, 1, 1, 1, 1.4).spine_oversubscription == pytest.approx(2.5 * 1.4)
    assert scaled_topology(topo, 1, 1, 1, 0.1).spine_oversubscription == 1.0   # max(1, 0.25)
    two, _ = system_group("dgx-h100", nodes=2)   # two tiers: nothing to scale
    assert scaled_topology(two, 1, 1, 1, 3.0) == two


def test_logs_across_pods_fit_the_spine_share():
    # 2 racks (one pod) and 16, 20 racks (2-3 pods of 8), truth: the spine's share 1.3x the preset's.
    # On NVL72 the NICs bind only across pods (inside one, the NVLS tree never waits for them), so the
    # logs see the NIC and the spine only together, through W = 32 s_e B_e / (o(n) m_s o_s): the fit pins
    # the ratio s_e / m_s = 1 / 1.3 = 0.769, and the split between the two follows the prior
    fit = fit_tiers("gb200-nvl72", _samples((2, 16, 20), m_s=1.3))
    assert "spine_oversubscription_scale" not in fit.not_fitted
    assert fit.inter_bandwidth_scale / fit.spine_oversubscription_scale == pytest.approx(1 / 1.3, rel=0.02)
    assert fit.median_abs_error < 0.02
    # and so it predicts a scale it was not fitted at (24 racks, still 3 pods) as the truth does
    topo, P = system_group("gb200-nvl72", nodes=24)
    truth = collective_cost("all_reduce", 8 * GiB, P, scaled_topology(topo, 1.0, 1.0, 1.0, 1.3)).total_s
    assert collective_cost("all_reduce", 8 * GiB, P, fit.topology(24)).total_s == pytest.approx(truth, rel=0.03)
    # used at 24 racks (3 pods, fitted up to 3): nothing about the spine is extrapolated; at 40 (5 pods) it is
    assert not any("spine" in p for p in fit.extrapolated(24))
    assert "spine_oversubscription_scale" in fit.extrapolated(40)


def test_logs_inside_one_pod_say_the_spine_is_the_presets_when_used_across_pods():
    fit = fit_tiers("gb200-nvl72", _samples((1, 2), m_s=1.0))
    assert "spine_oversubscription_scale" in fit.not_fitted       # no log depends on it
    assert fit.spine_oversubscription_scale == 1.0
    said = fit.extrapolated(20)
    assert any(p.startswith("spine_oversubscription (the preset's 2.5: no log spans pods of 8 nodes, "
                            "this group spans 3)") for p in said)
    assert not any("spine" in p for p in fit.extrapolated(8))   # 8 racks: still one pod


def test_two_tier_presets_have_no_spine_multiplier_and_old_profiles_still_load():
    fit = fit_tiers("dgx-h100", [TierSample(nodes=2, gpus=16, message_bytes=GiB, time_s=5e-3)])
    assert "spine_oversubscription_scale" not in fit.not_fitted and fit.spine_oversubscription_scale == 1.0
    d = tier_fit_to_dict(fit, {})
    del d["spine_oversubscription_scale"]                        # a profile written before the third tier
    assert tier_fit_from_dict(d, "old.json") == dataclasses.replace(fit, spine_oversubscription_scale=1.0)


@pytest.mark.parametrize("version", [True, 1.0, "1", None])
def test_a_tier_profile_version_is_the_integer_1(version):
    # issue 24 item 12: "version": true passed as 1
    d = tier_fit_to_dict(fit_tiers("dgx-h100", [TierSample(nodes=2, gpus=16, message_bytes=GiB, time_s=5e-3)]), {})
    d["version"] = version
    with pytest.raises(InputError, match=f"tier profile version {version!r} is not supported"):
        tier_fit_from_dict(d, "t.json")
