"""The public API: every exported name resolves, and none is shadowed by a submodule."""

import importlib
import types

import commcost


def test_every_export_resolves_to_a_non_module():
    # import every submodule first: a submodule named like an export would shadow it
    for module in set(commcost._EXPORTS.values()):
        importlib.import_module(module)
    for name in commcost.__all__:
        assert not isinstance(getattr(commcost, name), types.ModuleType), name


def test_unknown_name_raises_attribute_error():
    try:
        commcost.no_such_thing
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_one_shape_class_for_every_command():
    # the timeline's preset is the registry's TransformerSpec itself; the old second class is gone
    spec, seq = commcost.model_preset("llama2-7b")
    assert isinstance(spec, commcost.TransformerSpec) and spec == commcost.model_spec("llama2-7b")
    assert seq == 4096  # llama2-7b's training length in models.json
    assert "ModelShape" not in commcost.__all__ and not hasattr(commcost, "ModelShape")
