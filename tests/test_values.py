"""``findings_provider.values``: templated operator inputs arrive native or as text; each coercion accepts both and
refuses anything else with an error naming the input, the value and what is allowed."""

from __future__ import annotations

import pytest
from findings_provider.config import ConfigError
from findings_provider.values import (
    ParamError,
    as_bool,
    as_int,
    as_int_list,
    as_optional_digits,
    as_optional_int,
    as_str_list,
)


@pytest.mark.parametrize(("value", "expected"), [
    (True, True), (False, False), ("True", True), (" false ", False), ("1", True), ("0", False), ("yes", True),
    ("off", False), (1, True), (0, False),
])
def test_booleans_native_or_as_text(value, expected):
    assert as_bool(value, "dry_run") is expected


@pytest.mark.parametrize("value", ["maybe", "", None, 2])
def test_a_non_boolean_is_refused_naming_the_input(value):
    with pytest.raises(ParamError, match=rf"dry_run = {value!r} is not a boolean"):
        as_bool(value, "dry_run")


@pytest.mark.parametrize(("value", "expected"), [(5, 5), ("5", 5), (" 12 ", 12), (None, None), ("None", None),
                                                 ("null", None), ("", None)])
def test_optional_integers(value, expected):
    assert as_optional_int(value, "max_findings") == expected


@pytest.mark.parametrize("value", [True, "1.5", "ten", "1e3"])
def test_a_non_integer_is_refused(value):
    with pytest.raises(ParamError, match=r"max_findings = .* is not an integer"):
        as_optional_int(value, "max_findings")


def test_bounds_are_named_in_the_error():
    assert as_int("3000", "page_size", minimum=100, maximum=3000) == 3000
    with pytest.raises(ParamError, match=r"page_size = 3001 must be <= 3000"):
        as_int(3001, "page_size", minimum=100, maximum=3000)
    with pytest.raises(ParamError, match=r"page_size = 99 must be >= 100"):
        as_int("99", "page_size", minimum=100, maximum=3000)


def test_a_required_integer_must_be_given():
    with pytest.raises(ParamError, match=r"lookback_days is required \(an integer\)"):
        as_int(None, "lookback_days")


def test_numeric_ids_stay_text():
    assert as_optional_digits(123456789012345678901, "tracker_project_id") == "123456789012345678901"
    assert as_optional_digits(" 42 ", "tracker_project_id") == "42"
    assert as_optional_digits("none", "tracker_project_id") is None
    for bad in ("-1", "12a", True):
        with pytest.raises(ParamError, match=r"tracker_project_id = .* must be a numeric id"):
            as_optional_digits(bad, "tracker_project_id")


@pytest.mark.parametrize(("value", "expected"), [
    (["sast", "sca"], ["sast", "sca"]),
    ('["sast", "sca"]', ["sast", "sca"]),
    ("['sast', 'sca']", ["sast", "sca"]),  # Jinja renders a Python list
    ("sast, sca", ["sast", "sca"]),
    ("sast,sast", ["sast"]),  # duplicates dropped, order kept
    (None, []),
    ("", []),
])
def test_lists_from_a_list_json_or_commas(value, expected):
    assert as_str_list(value, "issue_types") == expected


def test_a_list_item_outside_the_allowed_ones_is_named():
    with pytest.raises(ParamError, match=r"issue_types: unknown value\(s\) \['dast'\]; allowed: sast, sca"):
        as_str_list("sast,dast", "issue_types", allowed=("sast", "sca"))


@pytest.mark.parametrize("value", ["[sast", 5, {"a": 1}])
def test_a_non_list_is_refused(value):
    with pytest.raises(ParamError, match=r"issue_types = .* is not a list"):
        as_str_list(value, "issue_types")


def test_integer_lists():
    assert as_int_list("[1, 2, -3]", "action_ids") == [1, 2, -3]
    with pytest.raises(ParamError, match=r"action_ids: \['x'\] are not integers"):
        as_int_list(["1", "x"], "action_ids")


def test_a_param_error_is_a_configuration_error_no_retry_can_fix():
    assert issubclass(ParamError, ConfigError)
