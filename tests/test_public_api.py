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
