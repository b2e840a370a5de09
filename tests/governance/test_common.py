"""Coercion of templated operator arguments (with and without native template rendering)."""

from __future__ import annotations

import pytest
from findings_provider.governance.common import as_id_list
from findings_provider.values import as_bool


@pytest.mark.parametrize(("value", "expected"), [(True, True), ("False", False), ("true", True), ("0", False)])
def test_as_bool_accepts_booleans_and_rendered_strings(value, expected):
    assert as_bool(value, "dry_run") is expected


def test_as_bool_refuses_anything_else():
    with pytest.raises(ValueError, match="dry_run = 'maybe' is not a boolean"):
        as_bool("maybe", "dry_run")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("None", None),
        ("", None),
        (["2101", 2102, "2101"], ["2101", "2102"]),
        ('["2101"]', ["2101"]),
        ("2101, 2102", ["2101", "2102"]),
        ([], []),
    ],
)
def test_as_id_list_accepts_lists_json_and_comma_separated_ids(value, expected):
    assert as_id_list(value) == expected


def test_as_id_list_refuses_names():
    with pytest.raises(ValueError, match=r"\['default-policy'\] are not numeric ids"):
        as_id_list(["default-policy"])
