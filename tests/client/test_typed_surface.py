"""The clients' typed surface: every public method annotated, and the async signatures generated from the sync ones
(``client/_async_surface.py``, by ``devtools/client_surface.py``) up to date with ``_Operations``."""

from __future__ import annotations

import inspect
import typing

import pytest
from findings_provider.client import AsyncFindingsClient, FindingsClient
from findings_provider.client._async_surface import AsyncOperations
from findings_provider.client.operations import _Operations

from devtools import client_surface


def test_the_async_surface_is_generated_from_the_operations() -> None:
    assert client_surface.TARGET.read_text() == client_surface.generate(), (
        "client/_async_surface.py is out of date with _Operations: run python devtools/client_surface.py"
    )


def _unannotated(func: typing.Callable[..., object]) -> list[str]:
    hints = typing.get_type_hints(func)
    missing = [p for p in inspect.signature(func).parameters if p != "self" and p not in hints]
    return missing + ([] if "return" in hints else ["return"])


@pytest.mark.parametrize("cls", [FindingsClient, AsyncFindingsClient, AsyncOperations])
def test_every_public_method_is_annotated(cls: type) -> None:
    methods = {n: getattr(cls, n) for n in dir(cls) if not n.startswith("_") and inspect.isfunction(getattr(cls, n))}
    assert "get_scan" in methods
    unannotated = {name: missing for name, f in methods.items() if (missing := _unannotated(f))}
    assert not unannotated, f"annotate these methods of {cls.__name__}: {unannotated}"


def test_the_async_surface_has_every_operation_with_its_result_awaitable() -> None:
    operations = client_surface.public_operations(_Operations)
    assert operations == client_surface.public_operations(AsyncOperations)
    for name in operations:
        sync_hints = typing.get_type_hints(getattr(_Operations, name))
        async_func = getattr(AsyncOperations, name)
        async_hints = typing.get_type_hints(async_func)
        assert {k: v for k, v in sync_hints.items() if k != "return"} == {
            k: v for k, v in async_hints.items() if k != "return"
        }, name
        if name.startswith("iter_"):
            assert not inspect.iscoroutinefunction(async_func), name
            assert "AsyncIterator" in str(async_hints["return"]), name
        else:
            assert inspect.iscoroutinefunction(async_func), name
            assert async_hints["return"] == sync_hints["return"], name


def test_the_package_exports_each_name_once_from_the_module_that_defines_it() -> None:
    """``findings_provider.client`` names its exports three times: the type checker's imports, the lazy loader's
    ``_EXPORTS`` and ``__all__``. They must agree, and each name must load the object its module defines."""
    import ast
    import importlib

    import findings_provider.client as package

    tree = ast.parse(inspect.getsource(package))
    (checking,) = [node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"]
    typed = {alias.name: str(node.module).rpartition(".")[2]
             for node in checking.body if isinstance(node, ast.ImportFrom) for alias in node.names}
    assert typed == package._EXPORTS
    assert sorted(package.__all__) == sorted(package._EXPORTS)
    assert len(package.__all__) == len(set(package.__all__))
    for name, module in package._EXPORTS.items():
        assert getattr(package, name) is getattr(importlib.import_module(f"{package.__name__}.{module}"), name)
