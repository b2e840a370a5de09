"""One source per fact: the API's vocabularies and maxima, the DAG ids and the tests' fixtures are written out once.

The vocabularies live in ``client/vocabulary.py``, the limits in ``client/limits.py``, the DAG ids in
``names.py``; everything else imports them. These tests read the source (no imports, so a copy is found
wherever it sits) and fail when a second literal copy appears: a collection of two or more words of one
vocabulary, an API maximum written as a number, or a list of two or more DAG ids. The same holds for the tests'
own helpers: a warehouse is built by ``tests/fixtures.py``, the fake task instance is ``tests/task_context.py``'s,
and a shared fixture or helper (``emulator``, ``fresh``, ``stored``...) is defined once, where :data:`SHARED` says.
"""

from __future__ import annotations

import ast
from enum import Enum
from pathlib import Path

import pytest
from findings_provider import names
from findings_provider.client import limits, vocabulary

ROOT = Path(__file__).resolve().parents[1]
PROVIDER = ROOT / "plugins" / "findings_provider"
#: Where the facts are defined (the only files allowed to spell them out).
SOURCES = {PROVIDER / "client" / "vocabulary.py", PROVIDER / "client" / "limits.py", PROVIDER / "names.py"}

#: Each vocabulary's words (enums whose values are too common to mean the vocabulary are skipped: the confidence
#: words are the severity words, and "unknown"/"direct" alone say nothing).
VOCABULARIES = {
    cls.__name__: frozenset(m.value for m in cls)
    for cls in vars(vocabulary).values()
    if isinstance(cls, type) and issubclass(cls, Enum) and cls not in (vocabulary.StrEnum, vocabulary.Confidence)
}
#: The maxima of the API's limits from 3000 up (smaller numbers such as 20 or 500 have too many other meanings).
MAXIMA = frozenset(v.maximum for v in vars(limits).values() if isinstance(v, limits.Limit) and v.maximum >= 3000)
#: The lists of DAG ids that ``names`` defines; a collection holding all of one of them is a copy.
DAG_LISTS = {name: frozenset(value) for name, value in vars(names).items() if name.endswith("_DAGS")}


def python_files(*folders: Path) -> list[Path]:
    """Every Python file under ``folders`` except the sources of the facts."""
    return sorted(p for folder in folders for p in folder.rglob("*.py") if p not in SOURCES)


def collections(tree: ast.AST, *, dicts: bool = True):
    """Every literal collection of constants in ``tree``: tuples, lists, sets (the arguments of a subscript such as
    ``Literal["a", "b"]`` included) and, with ``dicts``, dict keys and dict values, with their line."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            items = node.elts
        elif isinstance(node, ast.Dict) and dicts:
            yield node.lineno, [k for k in node.keys if k is not None]
            items = node.values
        else:
            continue
        yield node.lineno, items


def strings(items: list[ast.expr]) -> set[str]:
    return {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}


def vocabulary_copies(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line vocabulary words`` for each collection holding two or more words of one vocabulary."""
    found = []
    for line, items in collections(ast.parse(path.read_text(), str(path))):
        words = strings(items)
        for name, vocabulary_words in VOCABULARIES.items():
            if len(words & vocabulary_words) >= 2:
                found.append(f"{path.relative_to(root)}:{line} {name} {sorted(words & vocabulary_words)}")
    return found


def maxima_copies(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line number`` for each integer constant equal to an API maximum."""
    return [f"{path.relative_to(root)}:{node.lineno} {node.value}"
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.Constant) and type(node.value) is int and node.value in MAXIMA]


def dag_id_copies(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line name`` for each collection holding every id of one of ``names``' lists (a test that picks
    a few DAGs on purpose names them, and a dict keyed by DAG id says something per DAG; a copy of a whole list
    is what drifts)."""
    return [f"{path.relative_to(root)}:{line} {name}"
            for line, items in collections(ast.parse(path.read_text(), str(path)), dicts=False)
            for name, ids in DAG_LISTS.items() if ids <= strings(items)]


@pytest.mark.parametrize("path", python_files(PROVIDER, ROOT / "dags"), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_second_copy_of_a_vocabulary_or_a_maximum(path):
    copies = vocabulary_copies(path) + maxima_copies(path)
    assert not copies, "import these from findings_provider.client.vocabulary / .limits instead:\n" + "\n".join(copies)


@pytest.mark.parametrize("path", python_files(PROVIDER, ROOT / "dags", ROOT / "tests", ROOT / "devtools",
                                              ROOT / "bench"), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_second_list_of_dag_ids(path):
    copies = [] if path == Path(__file__) else dag_id_copies(path)
    assert not copies, "import the DAG ids from findings_provider.names instead:\n" + "\n".join(copies)


#: Where the tests' fixtures are defined.
TESTS = ROOT / "tests"
TASK_CONTEXT = TESTS / "task_context.py"
#: The only places that build a warehouse themselves (an engine of ``make_engine`` and ``create_all()``): the shared
#: fixtures; the warehouse's own tests (creating the tables is what they test, on SQLite and PostgreSQL); the crash
#: tests' child process (run outside pytest, without ``tests/`` on its path); the PostgreSQL fault tests (the faults
#: hook into the engine they build).
WAREHOUSE_BUILDERS = (TESTS / "fixtures.py", TESTS / "warehouse", TESTS / "chaos" / "crash_driver.py",
                      TESTS / "chaos" / "test_postgres_faults.py")


#: The fixtures and helpers every suite shares -> the one file that defines them. A suite chooses its emulator by
#: overriding ``emulator_options`` (the one fixture meant to be defined again), never by defining ``emulator``.
SHARED = {
    **{name: TESTS / "fixtures.py" for name in ("emulator", "fresh", "client", "warehouse", "warehouse_path")},
    **{name: TESTS / "warehouse_rows.py" for name in ("stored", "stored_finding", "stored_findings")},
}
#: The variants of a shared fixture: a suite whose tests need another kind overrides it in one place, with the reason.
SHARED_EXCEPTIONS: set[tuple[Path, str]] = {
    # every warehouse test runs on SQLite and on PostgreSQL (``engine``, parametrized)
    (TESTS / "warehouse" / "conftest.py", "warehouse"),
    # the warehouse file the default warehouse connection names, as an operator finds it
    (TESTS / "operators" / "conftest.py", "warehouse"),
    # each compressed day series runs on SQLite and on PostgreSQL (parametrized by the test)
    (TESTS / "multiday" / "test_multiday.py", "warehouse"),
}


def _calls(scope: ast.AST) -> set[str]:
    """The names called in ``scope``'s own body (a function nested in it is a scope of its own)."""
    names: set[str] = set()
    todo = list(ast.iter_child_nodes(scope))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else "")
        todo.extend(ast.iter_child_nodes(node))
    return names


def fixture_copies(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line what`` for each function (or module body) that builds a warehouse, calling ``make_engine`` and
    ``create_all``, each ``class FakeTaskInstance``, and each module-level definition of a :data:`SHARED` name."""
    tree = ast.parse(path.read_text(), str(path))
    found = [f"{path.relative_to(root)}:{node.lineno} def {node.name} (shared)" for node in tree.body
             if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in SHARED]
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "FakeTaskInstance":
            found.append(f"{path.relative_to(root)}:{node.lineno} class FakeTaskInstance")
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef) \
                and {"make_engine", "create_all"} <= _calls(node):
            line, name = (1, "module") if isinstance(node, ast.Module) else (node.lineno, node.name)
            found.append(f"{path.relative_to(root)}:{line} {name} builds a warehouse")
    return found


def _allowed(path: Path, copy: str) -> bool:
    if copy.endswith(" (shared)"):
        name = copy.split(" def ", 1)[1].removesuffix(" (shared)")
        return path == SHARED[name] or (path, name) in SHARED_EXCEPTIONS
    if copy.endswith("class FakeTaskInstance"):
        return path == TASK_CONTEXT
    return any(path == place or place in path.parents for place in WAREHOUSE_BUILDERS)


@pytest.mark.parametrize("path", python_files(TESTS), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_second_warehouse_builder_or_fake_task_instance(path):
    copies = [copy for copy in fixture_copies(path) if not _allowed(path, copy)]
    assert not copies, ("use tests/fixtures.py (make_warehouse, the shared fixtures: override emulator_options to "
                        "choose an emulator), tests/warehouse_rows.py (stored) and tests/task_context.py "
                        "(FakeTaskInstance) instead:\n" + "\n".join(copies))


def test_the_checks_find_a_copy(tmp_path):
    """The scanners themselves: each kind of copy is found, and the imported forms are not."""
    copy = tmp_path / "copy.py"
    copy.write_text('SEVERITIES = ("critical", "high")\nMODE = Literal["MODE_BLOCK", "MODE_MONITOR"]\n'
                    'AFTER = {"reopened": "open", "fixing": "fixing"}\nPAGE = 3000\n'
                    'DAGS = ["policy_tuning", "project_settings", "dependency_inventory", "extra"]\n')
    clean = tmp_path / "clean.py"
    clean.write_text("SEVERITIES = SEVERITY_ORDER\nPAGE = FINDINGS_PAGE_SIZE.maximum\nDAGS = PIPELINE_DAGS\n"
                     'ONE = ("critical", "a word")\n')
    found = sorted(line.split(" ", 1)[1] for line in _scan(copy))
    assert found == sorted(["Severity ['critical', 'high']", "PolicyMode ['MODE_BLOCK', 'MODE_MONITOR']",
                     "FindingStatus ['fixing', 'open']", "TriageState ['fixing', 'reopened']", "3000",
                     "GOVERNANCE_DAGS"])
    assert _scan(clean) == []


def test_the_fixture_check_finds_a_copy(tmp_path):
    """The fixture scanner: a warehouse built in a fixture or at module level, a second fake task instance and a
    second definition of a shared fixture or helper are found; a warehouse from the shared helper, an engine alone,
    a suite's ``emulator_options`` and a local variable named like a shared fixture are not."""
    copy = tmp_path / "copy.py"
    copy.write_text("@pytest.fixture\ndef warehouse(tmp_path):\n    store = Warehouse(make_engine(URL))\n"
                    "    store.create_all()\n    return store\n\n"
                    "ENGINE = make_engine(URL)\nWarehouse(ENGINE).create_all()\n\n"
                    "class FakeTaskInstance:\n    pass\n\n"
                    "@pytest.fixture(scope='module')\ndef emulator():\n    yield from start()\n\n"
                    "def stored(warehouse, table):\n    return []\n")
    clean = tmp_path / "clean.py"
    clean.write_text("def my_store(tmp_path):\n    return make_warehouse(tmp_path / 'w.db')\n\n"
                     "def engine():\n    return make_engine(URL)\n\n"
                     "@pytest.fixture(scope='module')\ndef emulator_options():\n    return {'findings': 5}\n\n"
                     "def test_it(fresh):\n    stored = fresh.requests()\n")
    assert sorted(copy.split(" ", 1)[1] for copy in fixture_copies(copy, tmp_path)) == [
        "class FakeTaskInstance", "def emulator (shared)", "def stored (shared)", "def warehouse (shared)",
        "module builds a warehouse", "warehouse builds a warehouse"]
    assert fixture_copies(clean, tmp_path) == []
    assert not _allowed(TESTS / "operators" / "conftest.py", "tests/operators/conftest.py:1 def emulator (shared)")
    assert _allowed(TESTS / "fixtures.py", "tests/fixtures.py:1 def emulator (shared)")


def _scan(path: Path) -> list[str]:
    """All three scanners over a file outside the repository (reported relative to its folder)."""
    return vocabulary_copies(path, path.parent) + maxima_copies(path, path.parent) + dag_id_copies(path, path.parent)
