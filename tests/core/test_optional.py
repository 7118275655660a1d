"""Direct tests of ``core/optional.py`` and ``core/errors.py``: a missing extra is one line naming the
``pip install`` that brings it; an over-long JSON integer is named by its field."""

from __future__ import annotations

import pytest

from commcost.core.errors import InputError, long_integer_field
from commcost.core.optional import require


def test_a_present_module_is_returned():
    assert require("json", "none").dumps([1]) == "[1]"


def test_a_missing_extra_names_its_install():
    with pytest.raises(InputError) as exc:
        require("commcost_no_such_module.sub", "plot")
    assert str(exc.value) == ("commcost_no_such_module is not installed; install it with: "
                              "pip install 'commcost[plot]'")


def test_input_error_is_a_value_error():
    assert issubclass(InputError, ValueError)


def test_long_integer_field_names_the_key():
    text = '{"name": "x", "ts": ' + "9" * 4300 + "}"
    assert long_integer_field(text) == "field 'ts'"
    assert long_integer_field('{"ts": 12}') == "a value"
