"""docs/provider.md against the code: every class it documents (a heading with an import line) has an argument table
whose rows are the class's own ``__init__`` keyword arguments, in the signature's order, with the signature's default
(as :func:`default_cell` writes it) and, where the table has the column, ``yes`` under "templated" exactly when the
argument is a template field; and every operator, sensor and notifier the provider declares is documented.

A class's own arguments are those of the ``__init__`` the provider defines for it (none when it inherits Airflow's),
``self`` and ``**kwargs`` aside: the arguments of a base class arrive through ``**kwargs`` and are documented once,
where the doc introduces the base (the connection ids of ``FindingsBaseOperator``, the arguments of Airflow's
``ApprovalOperator``). A ``dry_run`` argument is held in the attribute ``is_dry_run``, its template field.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest
from findings_provider import get_provider_info

DOC = Path(__file__).resolve().parents[1] / "docs" / "provider.md"
#: The attribute an argument is held in (and templated as), where it is not the argument's name.
ATTRIBUTES = {"dry_run": "is_dry_run"}


def default_cell(parameter: inspect.Parameter) -> str:
    """The default as the doc writes it: ``required`` when there is none; None, a bool or a number as Python writes
    it (``None``, ``False``, ``30``, ``0.5``); a string in backticks without its quotes; anything else (``()``) as
    Python writes it, in backticks."""
    value = parameter.default
    if value is inspect.Parameter.empty:
        return "required"
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    return f"`{value}`" if isinstance(value, str) else f"`{value!r}`"


def cells(line: str, columns: int = 0) -> list[str]:
    """The cells of a table line; with ``columns``, the last cell keeps any ``|`` of its text."""
    return [cell.strip() for cell in line.strip().strip("|").split("|", columns - 1 if columns else -1)]


def documented_classes() -> dict[str, tuple[str, list[dict[str, str]]]]:
    """Per class the doc documents: the module of its import line and the rows of its argument table (a dict per
    row, keyed by the header's column names, a missing cell empty; no rows when the section has no table)."""
    found = {}
    for section in re.split(r"^#+ ", DOC.read_text(encoding="utf-8"), flags=re.MULTILINE):
        imported = re.search(r"^`from (\S+) import (\w+)`$", section, re.MULTILINE)
        if imported is None:
            continue
        table = re.search(r"^\| argument \|.*\n\|[-| ]+\|\n(?:\|.*\n?)*", section, re.MULTILINE)
        lines = table.group().splitlines() if table else []
        header = cells(lines[0]) if lines else []
        rows = [dict(zip(header, [*cells(line, len(header)), *[""] * len(header)], strict=False)) for line in lines[2:]]
        found[imported.group(2)] = (imported.group(1), rows)
    return found


DOCUMENTED = documented_classes()


def own_arguments(cls: type) -> list[inspect.Parameter]:
    """The keyword arguments of ``cls.__init__`` when the provider defines it, ``self`` and ``**kwargs`` aside."""
    init = cls.__init__  # type: ignore[misc]
    if not inspect.unwrap(init).__module__.startswith("findings_provider."):
        return []
    return [p for p in inspect.signature(init).parameters.values()
            if p.name != "self" and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


@pytest.mark.parametrize("name", list(DOCUMENTED))
def test_argument_table_matches_the_signature(name: str) -> None:
    module, rows = DOCUMENTED[name]
    cls = getattr(importlib.import_module(module), name)
    arguments = own_arguments(cls)
    in_doc, in_code = [row["argument"].strip("`") for row in rows], [p.name for p in arguments]
    missing, extra = [a for a in in_code if a not in in_doc], [a for a in in_doc if a not in in_code]
    assert in_doc == in_code, f"{name}: the doc has {in_doc}, the code {in_code}; missing {missing}, extra {extra}"
    templated = set(getattr(cls, "template_fields", ()))
    for row, parameter in zip(rows, arguments, strict=True):
        assert row["default"] == default_cell(parameter), (
            f"{name}.{parameter.name}: default {row['default']!r} in the doc, {default_cell(parameter)!r} in the code")
        if "templated" in row:
            expected = "yes" if ATTRIBUTES.get(parameter.name, parameter.name) in templated else "no"
            assert row["templated"] == expected, (
                f"{name}.{parameter.name}: templated {row['templated']!r} in the doc, {expected!r} in the code")


def test_every_operator_sensor_and_notifier_is_documented() -> None:
    from airflow.sdk import BaseOperator

    info = get_provider_info()
    modules = [module for section in ("operators", "sensors") for module in info[section][0]["python-modules"]]
    declared = {name for module in modules for name, value in vars(importlib.import_module(module)).items()
                if isinstance(value, type) and issubclass(value, BaseOperator) and value.__module__ == module
                and not name.startswith("_")}
    declared |= {dotted.rpartition(".")[2] for dotted in info["notifications"]}
    assert declared - set(DOCUMENTED) == set()
