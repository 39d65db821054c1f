"""geolib.measure.validate: the argument checks shared by measure, theory and verdicts."""

from __future__ import annotations

import numpy as np
import pytest

from geolib.measure import validate as check


@pytest.mark.parametrize("options", [("a", "b"), ["a", "b"], {"a": 1, "b": 2}])
def test_one_of_returns_an_allowed_value_from_any_collection(options):
    assert check.one_of("kind", "b", options) == "b"


def test_one_of_names_the_parameter_the_options_and_the_value():
    with pytest.raises(ValueError, match=r"^kind must be one of \['a', 'b'\], got 'c'$"):
        check.one_of("kind", "c", ("a", "b"))
    with pytest.raises(ValueError, match="must be one of"):
        check.one_of("kind", "a", ())  # nothing is allowed


def test_one_of_reads_a_one_shot_iterable_once():
    """The options are listed before the test, so a generator is not spent by it."""
    with pytest.raises(ValueError, match=r"\['x', 'y'\], got 'z'"):
        check.one_of("kind", "z", (c for c in "xy"))


@pytest.mark.parametrize(
    ("value", "low", "strict", "ok"),
    [
        (0.0, 0.0, False, True),
        (0.0, 0.0, True, False),
        (-1, 0.0, False, False),
        (2, None, False, True),
    ],
)
def test_scalar_bounds(value, low, strict, ok):
    if ok:
        assert check.scalar("x", value, low=low, strict=strict) == float(value)
    else:
        with pytest.raises(ValueError, match="x must be"):
            check.scalar("x", value, low=low, strict=strict)


@pytest.mark.parametrize("bad", [np.nan, np.inf, "a", None])
def test_scalar_refuses_what_is_not_a_finite_number(bad):
    with pytest.raises(ValueError, match="x must be"):
        check.scalar("x", bad)
