"""The dependency inventory's filter, built from the YAML.

The operators that pull and report are tested in ``tests/operators/test_dependencies.py``.
"""

from __future__ import annotations

from findings_provider.config import DependencyFilters
from findings_provider.governance.dependency_inventory import dependency_filter


def test_no_filters_send_no_filter():
    assert dependency_filter(DependencyFilters()) is None
