"""Profile files: round trip, schema checks, and measurement files."""

from __future__ import annotations

import json
import math

import pytest

from commcost.calibrate.data import Measurement, MeasurementRow, load_series, read_measurement, write_measurement
from commcost.calibrate.fit import Sample, compare, fit_alpha_beta
from commcost.calibrate.profile import PROFILE_VERSION, Profile, load_profile, profile_to_dict, save_profile
from commcost.comm.collectives import Collective
from commcost.core.errors import InputError
from commcost.comm.topology import Link
from conftest import DATA

IB = DATA / "nccl_tests" / "h100_ib_2node_16gpu_all_reduce.log"


def ib_profile() -> Profile:
    series = load_series(IB)
    fit = fit_alpha_beta(series.samples, op=series.op, gpus=series.gpus)
    return Profile.from_fit(fit, compare(fit, series.samples), series.provenance)


def test_profile_round_trips(tmp_path):
    original = ib_profile()
    path = tmp_path / "p.json"
    save_profile(original, path)
    loaded = load_profile(path)
    assert loaded.fit == original.fit  # same op, algorithm, gpus and regimes, bit for bit
    assert (loaded.r2, loaded.points) == (original.r2, original.points)
    assert loaded.provenance["source_kind"] == "nccl-tests"
    assert loaded.path == str(path)
    assert isinstance(loaded.link, Link) and loaded.link == original.fit.link
    obj = json.loads(path.read_text())
    assert obj["version"] == PROFILE_VERSION and obj["regimes"][-1]["max_size_bytes"] is None
    assert math.isinf(loaded.fit.regimes[-1].max_size_bytes)


def write(tmp_path, obj) -> str:
    path = tmp_path / "bad.json"
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


@pytest.mark.parametrize("mutate,fragment", [
    (lambda o: o.update(version=2), "profile version 2 is not supported"),
    (lambda o: o.pop("version"), "profile version None is not supported"),
    (lambda o: o.pop("regimes"), "missing field 'regimes'"),
    (lambda o: o.pop("op"), "missing field 'op'"),
    (lambda o: o.update(op="allreduce_magic"), "unknown op 'allreduce_magic'"),
    (lambda o: o.update(gpus="16"), "field 'gpus' has the wrong type"),
    (lambda o: o["regimes"][0].pop("alpha_s"), "regimes[0]: missing field 'alpha_s'"),
    (lambda o: o["regimes"][0].update(bandwidth_bytes_per_s=-1), "'bandwidth_bytes_per_s' must be between 1000 and 1e+15"),
    (lambda o: o.pop("quality"), "missing field 'quality'"),
])
def test_bad_profiles_are_refused(tmp_path, mutate, fragment):
    obj = profile_to_dict(ib_profile())
    mutate(obj)
    with pytest.raises(InputError) as exc:
        load_profile(write(tmp_path, obj))
    assert fragment in str(exc.value)


@pytest.mark.parametrize("text,fragment", [("", "empty file"), ("{not json", "invalid JSON at line 1"),
                                           ("[1, 2]", "expected a JSON object")])
def test_unreadable_profiles(tmp_path, text, fragment):
    with pytest.raises(InputError, match=fragment.replace("[", r"\[")):
        load_profile(write(tmp_path, text))


def rows(op="all_reduce", gpus=2, sizes=(1024, 2048, 4096)):
    return tuple(MeasurementRow(op=op, gpus=gpus, size_bytes=s, count=s // 4, dtype="float32",
                                time_s=1e-5 + s / 1e9, time_min_s=1e-5, time_max_s=2e-5,
                                algbw_bytes_per_s=s / (1e-5 + s / 1e9), busbw_bytes_per_s=s / (1e-5 + s / 1e9),
                                iters=20) for s in sizes)


@pytest.mark.parametrize("name", ["m.csv", "m.json"])
def test_measurement_round_trips(tmp_path, name):
    m = Measurement(rows=rows(), provenance={"backend": "gloo", "hosts": ["a", "b"], "world_size": 2})
    write_measurement(m, tmp_path / name)
    back = read_measurement(tmp_path / name)
    assert back == m
    series = load_series(tmp_path / name)
    assert series.op is Collective.ALL_REDUCE and series.gpus == 2 and len(series.samples) == 3
    assert series.samples[0] == Sample(size_bytes=1024, time_s=1e-5 + 1024 / 1e9)


def test_series_selection(tmp_path):
    m = Measurement(rows=rows("all_gather") + rows("reduce_scatter"), provenance={})
    write_measurement(m, tmp_path / "m.csv")
    with pytest.raises(InputError, match="holds several collectives .* choose one with --op"):
        load_series(tmp_path / "m.csv")
    assert load_series(tmp_path / "m.csv", op=Collective.ALL_GATHER).op is Collective.ALL_GATHER
    with pytest.raises(InputError, match="no measurements of broadcast"):
        load_series(tmp_path / "m.csv", op=Collective.BROADCAST)
    m = Measurement(rows=rows(gpus=2) + rows(gpus=4), provenance={})
    write_measurement(m, tmp_path / "g.csv")
    with pytest.raises(InputError, match="several group sizes"):
        load_series(tmp_path / "g.csv")
    assert load_series(tmp_path / "g.csv", gpus=4).gpus == 4


def test_nccl_tests_placement(tmp_path):
    # First row of the IB log: out-of-place 68.52 us, in-place 24.70 us.
    def first(placement):
        return min(load_series(IB, placement=placement).samples, key=lambda s: s.size_bytes)
    assert first("out_of_place").time_s == pytest.approx(68.52e-6)
    assert first("in_place").time_s == pytest.approx(24.70e-6)
    assert first("best").time_s == pytest.approx(24.70e-6)


# --- issue 24 items 12 and 7: kind and version are checked by type; 4,300-digit integers named -----

@pytest.mark.parametrize("mutate,fragment", [
    (lambda o: o.update(kind=None), "field 'kind' must be \"commcost-profile\", got None"),
    (lambda o: o.update(kind=True), "field 'kind' must be \"commcost-profile\", got True"),
    (lambda o: o.update(kind=float("nan")), "field 'kind' must be \"commcost-profile\", got nan"),
    (lambda o: o.pop("kind"), "field 'kind' must be \"commcost-profile\", got 'missing'"),
    (lambda o: o.update(version=True), "profile version True is not supported"),   # True == 1 in Python
    (lambda o: o.update(version=1.0), "profile version 1.0 is not supported"),
])
def test_kind_and_version_are_checked(tmp_path, mutate, fragment):
    obj = profile_to_dict(ib_profile())
    mutate(obj)
    with pytest.raises(InputError) as exc:
        load_profile(write(tmp_path, obj))
    assert fragment in str(exc.value)


def test_an_integer_past_the_digit_limit_names_the_field(tmp_path):
    text = json.dumps(profile_to_dict(ib_profile())).replace('"gpus": 16', '"gpus": ' + "1" * 5000)
    with pytest.raises(InputError, match=r"bad.json: field 'gpus' is an integer of more than 4300 digits"):
        load_profile(write(tmp_path, text))


def test_stamped_provenance_keeps_the_source_date_and_names_this_version():
    import datetime as dt

    import commcost
    from commcost.calibrate.profile import stamped_provenance

    now = dt.datetime(2026, 12, 2, 11, 30, 5, 123456, tzinfo=dt.timezone.utc)
    src = {"source": "a.log", "commcost_version": "0.0.1"}
    out = stamped_provenance(src, now=now)
    assert out == {"source": "a.log", "created": "2026-12-02T11:30:05+00:00", "commcost_version": commcost.__version__}
    assert src == {"source": "a.log", "commcost_version": "0.0.1"}  # a copy: the series' own is untouched
    assert stamped_provenance({"created": "2025-01-01"}, now=now)["created"] == "2025-01-01"
