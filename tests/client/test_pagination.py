"""Pagination: offset (findings, projects), cursor (scans, policy rules, secrets) and mixed (dependencies,
repositories); lazy iteration, de-duplication, raw pages and the async iterators."""

from __future__ import annotations

import json
import typing

import msgspec
import pytest
from findings_provider.client import PaginationError, RawFindingsPage
from findings_provider.client.models import FindingsPage
from findings_provider.client.operations import _Operations
from findings_provider.client.pagination import PAGINATED

from devtools import client_surface

from . import payloads as p
from .conftest import Recorder, collect_async, raw


def findings_page(ids, shape: str = "sast") -> dict:
    items = [{"id": i, "severity": "high"} for i in ids]
    if shape == "flat":
        return {"findings": items}
    return {f"{shape}Findings": {"findings": items}}


def page_params(rec: Recorder) -> list[tuple[str, str]]:
    return [(r.url.params["page"], r.url.params["page_size"]) for r in rec.requests]


# --- offset: findings ---------------------------------------------------------------------------------------


def test_findings_offset_three_pages_last_short(make_client) -> None:
    rec = Recorder(
        findings_page(range(0, 100)), findings_page(range(100, 200)), findings_page(range(200, 237))
    )
    client = make_client(rec)
    pages = list(client.pages(client.list_findings, "sast", page_size=100, severities=["high"]))
    assert [len(pg.items) for pg in pages] == [100, 100, 37]
    assert all(isinstance(pg, FindingsPage) for pg in pages)
    assert page_params(rec) == [("0", "100"), ("1", "100"), ("2", "100")]
    assert all(r.url.params.get_list("severities") == ["high"] for r in rec.requests)


def test_findings_exactly_full_last_page_needs_one_empty_page(make_client) -> None:
    rec = Recorder(findings_page(range(0, 100)), findings_page(range(100, 200)), findings_page([]))
    client = make_client(rec)
    items = list(client.items(client.list_findings, "sca", page_size=100))
    assert [f.id for f in items] == list(range(200))
    assert page_params(rec) == [("0", "100"), ("1", "100"), ("2", "100")]
    assert all(r.url.params["issue_type"] == "sca" for r in rec.requests)


def test_findings_empty_first_page(make_client) -> None:
    rec = Recorder(findings_page([]))
    client = make_client(rec)
    assert list(client.items(client.list_findings, "sast")) == []
    assert rec.count == 1
    assert rec.last.url.params["page"] == "0"
    assert rec.last.url.params["page_size"] == "3000"  # the default page size of the iterator


def test_findings_start_page_resumes(make_client) -> None:
    rec = Recorder(findings_page(range(500, 600)), findings_page(range(600, 610)))
    client = make_client(rec)
    items = list(client.items(client.list_findings, "sast", page_size=100, page=5))
    assert [f.id for f in items] == list(range(500, 610))
    assert page_params(rec) == [("5", "100"), ("6", "100")]


def test_iter_findings_deduplicates_ids_across_pages(make_client) -> None:
    # a new finding arrived between the requests: the last item of page 0 moves to the top of page 1
    rec = Recorder(
        findings_page(range(0, 100), "flat"), findings_page(range(99, 199), "flat"), findings_page([])
    )
    client = make_client(rec)
    ids = [f.id for f in client.items(client.list_findings, "sast", page_size=100)]
    assert ids == list(range(0, 199))
    assert rec.count == 3


def test_iterators_are_lazy(make_client) -> None:
    rec = Recorder(findings_page(range(0, 100)), findings_page(range(100, 150)))
    client = make_client(rec)
    items = client.items(client.list_findings, "sast", page_size=100)
    assert rec.count == 0  # nothing requested before iteration
    first = next(items)
    assert first.id == 0
    assert rec.count == 1
    for _ in range(99):
        next(items)
    assert rec.count == 1  # the whole first page is served without a second request
    assert next(items).id == 100
    assert rec.count == 2
    assert len(list(items)) == 49
    assert rec.count == 2


def test_page_iterator_is_lazy_one_request_per_step(make_client) -> None:
    rec = Recorder({"scans": [p.scan("1")], "cursor": "c2"}, {"scans": [p.scan("2")], "cursor": "c3"})
    client = make_client(rec)
    pages = client.pages(client.search_scans, limit=1)
    assert rec.count == 0
    next(pages)
    assert rec.count == 1
    next(pages)
    assert rec.count == 2


def test_raw_pages_keep_the_exact_bytes_of_each_finding(make_client) -> None:
    first = b'{"id": 1,   "note": "caf\\u00e9 \xc3\xa9", "relevant_since": "2020-11-18T23:28:12.391Z"}'
    second = b'{"id":2,"nested":{"a":[1,2.50,true]}}'
    body = b'{"sastFindings": {"findings": [' + first + b" ,\n " + second + b"]}}"
    rec = Recorder(raw(body))
    client = make_client(rec)
    pages = list(client.raw_pages(client.list_findings, "sast", page_size=100))
    assert len(pages) == 1
    assert isinstance(pages[0], RawFindingsPage)
    assert [bytes(item) for item in pages[0].items] == [first, second]
    assert all(isinstance(item, msgspec.Raw) for item in pages[0].items)


def test_raw_pages_flat_shape_paginate(make_client) -> None:
    full = json.dumps({"findings": [{"id": i} for i in range(100)]}).encode()
    rec = Recorder(raw(full), raw(b'{"findings": [{"id": 100}]}'))
    client = make_client(rec)
    pages = list(client.raw_pages(client.list_findings, "sca", page_size=100))
    assert [len(pg.items) for pg in pages] == [100, 1]
    assert bytes(pages[1].items[0]) == b'{"id": 100}'
    assert page_params(rec) == [("0", "100"), ("1", "100")]


# --- offset: projects ---------------------------------------------------------------------------------------


def test_projects_offset_until_short_page(make_client) -> None:
    rec = Recorder(
        {"projects": [p.project(f"org/r{i}") for i in range(2)]},
        {"projects": [p.project("org/r2")]},
    )
    client = make_client(rec)
    names = [pr.name for pr in client.items(client.list_projects, page_size=2)]
    assert names == ["org/r0", "org/r1", "org/r2"]
    assert page_params(rec) == [("0", "2"), ("1", "2")]


# --- cursor: scans (body), policy rules and secrets (query) -------------------------------------------------


def test_scans_cursor_to_the_end(make_client) -> None:
    rec = Recorder(
        {"scans": [p.scan("1"), p.scan("2")], "cursor": "c2"},
        {"scans": [p.scan("3")], "cursor": "c3"},
        {"scans": [p.scan("4")], "cursor": ""},
    )
    client = make_client(rec)
    ids = [s.id for s in client.items(client.search_scans, branch="main")]
    assert ids == ["1", "2", "3", "4"]
    bodies = [json.loads(r.content) for r in rec.requests]
    assert [b.get("cursor") for b in bodies] == [None, "c2", "c3"]
    assert all(b["branch"] == "main" for b in bodies)


def test_scans_stop_when_cursor_absent(make_client) -> None:
    rec = Recorder({"scans": [p.scan("1")], "cursor": "c2"}, {"scans": [p.scan("2")]})
    client = make_client(rec)
    assert [s.id for s in client.items(client.search_scans)] == ["1", "2"]
    assert rec.count == 2


def test_scans_start_cursor_resumes(make_client) -> None:
    rec = Recorder({"scans": [p.scan("7")], "cursor": None})
    client = make_client(rec)
    assert [s.id for s in client.items(client.search_scans, cursor="c7")] == ["7"]
    assert rec.json(0)["cursor"] == "c7"


def test_policy_rules_cursor_in_query(make_client) -> None:
    rec = Recorder(
        {"cursor": "r2", "policy": p.policy(), "rules": [p.rule(id="a")]},
        {"cursor": "r3", "policy": p.policy(), "rules": [p.rule(id="b")]},
        {"cursor": "", "policy": p.policy(), "rules": [p.rule(id="c")]},
    )
    client = make_client(rec)
    rules = list(client.items(client.list_policy_rules, 9, limit=1))
    assert [r.id for r in rules] == ["a", "b", "c"]
    assert [r.url.params.get("cursor") for r in rec.requests] == [None, "r2", "r3"]
    assert all(r.url.path == "/api/v1/deployments/42/policies/9" for r in rec.requests)
    assert all(r.url.params["limit"] == "1" for r in rec.requests)


def test_policy_rules_start_cursor(make_client) -> None:
    rec = Recorder({"cursor": "", "rules": [p.rule()]})
    client = make_client(rec)
    list(client.pages(client.list_policy_rules, "9", cursor="r5"))
    assert rec.last.url.params["cursor"] == "r5"


def test_secrets_cursor_to_the_end_and_dedup(make_client) -> None:
    rec = Recorder(
        {"findings": [{"id": 1}, {"id": 2}], "cursor": "s2"},
        {"findings": [{"id": 2}, {"id": 3}], "cursor": "s3"},
        {"findings": [], "cursor": "s4"},  # an empty page ends the chain even with a cursor
    )
    client = make_client(rec)
    assert [f.id for f in client.items(client.list_secrets, limit=2)] == [1, 2, 3]
    assert [r.url.params.get("cursor") for r in rec.requests] == [None, "s2", "s3"]
    assert all(r.url.path == "/api/v1/deployments/42/secrets" for r in rec.requests)


def test_secrets_raw_pages_follow_the_cursor(make_client) -> None:
    rec = Recorder(raw(b'{"secrets": [{"id": 1}], "nextCursor": 5}'), raw(b'{"secrets": [{"id": 2}]}'))
    client = make_client(rec)
    pages = list(client.raw_pages(client.list_secrets, cursor="s1"))
    assert [bytes(pg.items[0]) for pg in pages] == [b'{"id": 1}', b'{"id": 2}']
    assert [r.url.params.get("cursor") for r in rec.requests] == ["s1", "5"]


def test_repeated_cursor_is_a_pagination_error(make_client) -> None:
    rec = Recorder({"scans": [p.scan("1")], "cursor": "c2"}, {"scans": [p.scan("2")], "cursor": "c2"})
    client = make_client(rec)
    pages = client.pages(client.search_scans)
    assert next(pages).items[0].id == "1"
    assert next(pages).items[0].id == "2"
    with pytest.raises(PaginationError, match="'c2' twice"):
        next(pages)
    assert rec.count == 2


def test_cursor_equal_to_start_cursor_is_a_pagination_error(make_client) -> None:
    rec = Recorder({"cursor": "r5", "rules": [p.rule()]})
    client = make_client(rec)
    with pytest.raises(PaginationError, match="r5"):
        list(client.items(client.list_policy_rules, 9, cursor="r5"))
    assert rec.count == 1


def test_cursor_cycle_is_detected(make_client) -> None:
    rec = Recorder(
        {"findings": [{"id": 1}], "cursor": "a"},
        {"findings": [{"id": 2}], "cursor": "b"},
        {"findings": [{"id": 3}], "cursor": "a"},
    )
    client = make_client(rec)
    with pytest.raises(PaginationError):
        list(client.items(client.list_secrets))
    assert rec.count == 3


# --- mixed: dependencies and repositories -------------------------------------------------------------------


def test_dependencies_has_more_decides(make_client) -> None:
    rec = Recorder(
        {"dependencies": [{"id": "1", "name": "a"}], "cursor": "100", "hasMore": True},
        {"dependencies": [{"id": "2", "name": "b"}], "cursor": "200", "hasMore": True},
        {"dependencies": [{"id": "3", "name": "c"}], "cursor": "300", "hasMore": False},
    )
    client = make_client(rec)
    deps = list(client.items(client.list_dependencies, page_size=1, dependency_filter={"name": "x"}))
    assert [d.name for d in deps] == ["a", "b", "c"]
    bodies = [json.loads(r.content) for r in rec.requests]
    assert [b.get("cursor") for b in bodies] == [None, "100", "200"]
    assert all(b["pageSize"] == 1 and b["dependencyFilter"] == {"name": "x"} for b in bodies)
    assert all(b["deploymentId"] == "42" for b in bodies)


def test_repositories_numeric_cursor(make_client) -> None:
    rec = Recorder(
        {"repositorySummaries": [{"id": 1, "name": "org/a"}], "cursor": 5, "hasMore": True},
        {"repositorySummaries": [{"id": 2, "name": "org/b"}], "cursor": 10, "hasMore": False},
    )
    client = make_client(rec)
    repos = list(client.items(client.list_repositories_with_dependencies, page_size=1))
    assert [r.name for r in repos] == ["org/a", "org/b"]
    cursors = [json.loads(r.content).get("cursor") for r in rec.requests]
    assert cursors == [None, 5]
    assert isinstance(cursors[1], int)  # the cursor is number<uint32> in this body


def test_repositories_start_cursor(make_client) -> None:
    rec = Recorder({"repositorySummaries": [], "cursor": 0, "hasMore": False})
    client = make_client(rec)
    list(client.pages(client.list_repositories_with_dependencies, cursor="25"))
    assert rec.json()["cursor"] == 25


# --- async iteration ----------------------------------------------------------------------------------------


def test_async_findings_iteration(make_async_client) -> None:
    rec = Recorder(findings_page(range(0, 100)), findings_page(range(99, 150)))
    client = make_async_client(rec)
    items = collect_async(lambda: client.items(client.list_findings, "sast", page_size=100), client)
    assert [f.id for f in items] == list(range(150))
    assert page_params(rec) == [("0", "100"), ("1", "100")]


def test_async_cursor_iteration_and_pagination_error(make_async_client) -> None:
    rec = Recorder({"scans": [p.scan("1")], "cursor": "c2"}, {"scans": [p.scan("2")], "cursor": ""})
    client = make_async_client(rec)
    scans = collect_async(lambda: client.items(client.search_scans), client)
    assert [s.id for s in scans] == ["1", "2"]
    assert [json.loads(r.content).get("cursor") for r in rec.requests] == [None, "c2"]

    rec2 = Recorder({"scans": [p.scan("1")], "cursor": "c2"}, {"scans": [p.scan("2")], "cursor": "c2"})
    client2 = make_async_client(rec2)
    with pytest.raises(PaginationError):
        collect_async(lambda: client2.pages(client2.search_scans), client2)


def test_async_raw_pages_and_laziness(make_async_client) -> None:
    rec = Recorder(raw(b'{"findings": [{"id": 7}]}'))
    client = make_async_client(rec)
    iterator = client.raw_pages(client.list_findings, "sast")
    assert rec.count == 0
    pages = collect_async(lambda: iterator, client)
    assert [bytes(i) for i in pages[0].items] == [b'{"id": 7}']
    assert rec.count == 1


def test_async_mixed_pagination(make_async_client) -> None:
    rec = Recorder(
        {"dependencies": [{"id": "1"}], "cursor": "9", "hasMore": True},
        {"dependencies": [{"id": "2"}], "cursor": "10", "hasMore": False},
    )
    client = make_async_client(rec)
    deps = collect_async(lambda: client.items(client.list_dependencies), client)
    assert [d.id for d in deps] == ["1", "2"]
    assert [json.loads(r.content).get("cursor") for r in rec.requests] == [None, "9"]


# --- a server that ignores the page (offset) or never advances its cursor -------------------------------------


def test_offset_page_ignored_by_the_server_is_a_pagination_error(make_client) -> None:
    """The same full page again and again: stop at the second one, naming the page, instead of looping (three
    answers only: a fourth request fails the test)."""
    same = findings_page(range(0, 100))
    rec = Recorder(same, same, same)
    client = make_client(rec)
    with pytest.raises(PaginationError, match=r"page 1 repeats page 0 exactly") as info:
        list(client.items(client.list_findings, "sast", page_size=100))
    assert info.value.endpoint == "findings"
    assert rec.count == 2
    # pages alike but for their last item are different pages
    rec = Recorder(same, findings_page([*range(0, 99), 500]), same, findings_page([7]))
    client = make_client(rec)
    assert [len(pg.items) for pg in client.pages(client.list_findings, "sast", page_size=100)] == [100] * 3 + [1]


def test_offset_raw_page_ignored_by_the_server_is_a_pagination_error(make_client) -> None:
    full = json.dumps({"findings": [{"id": i} for i in range(100)]}).encode()
    rec = Recorder(raw(full), raw(full), raw(full), raw(full))
    client = make_client(rec)
    pages = client.raw_pages(client.list_findings, "sast", page_size=100, page=4)
    assert [len(next(pages).items), len(next(pages).items)] == [100, 100]  # pages 4 and 5, alike
    with pytest.raises(PaginationError, match=r"page 5 repeats page 4 exactly"):
        next(pages)
    assert rec.count == 2
    assert [r.url.params["page"] for r in rec.requests] == ["4", "5"]


def test_offset_projects_page_ignored_by_the_server(make_client) -> None:
    same = {"projects": [p.project("org/a"), p.project("org/b")]}
    rec = Recorder(same, same, same)
    client = make_client(rec)
    with pytest.raises(PaginationError, match="page 1"):
        list(client.items(client.list_projects, page_size=2))
    assert rec.count == 2


def test_async_offset_raw_page_ignored_by_the_server(make_async_client) -> None:
    full = json.dumps({"sastFindings": {"findings": [{"id": i} for i in range(100)]}}).encode()
    rec = Recorder(raw(full), raw(full), raw(full))
    client = make_async_client(rec)
    with pytest.raises(PaginationError, match="page 1 repeats page 0"):
        collect_async(lambda: client.raw_pages(client.list_findings, "sast", page_size=100), client)
    assert rec.count == 2


def test_a_cursor_that_never_changes_names_the_page_and_endpoint(make_client) -> None:
    rec = Recorder(*[raw(b'{"findings": [{"id": 1}], "cursor": "same"}')] * 3)
    client = make_client(rec)
    with pytest.raises(PaginationError, match=r"page 2: .*'same' twice") as info:
        list(client.raw_pages(client.list_secrets))
    assert info.value.endpoint == "secrets"
    assert rec.count == 2


# --- the one pager: which operations it walks --------------------------------------------------------------------


def test_only_a_paginated_operation_of_the_same_client_is_walked(make_client) -> None:
    rec = Recorder()
    client, other = make_client(rec), make_client(rec)
    with pytest.raises(TypeError, match=r"get_scan is not a paginated operation of this client; these are: .*"
                                        r"list_findings"):
        client.pages(client.get_scan, 1)
    with pytest.raises(TypeError, match="list_findings is not a paginated operation of this client"):
        client.items(other.list_findings, "sast")
    with pytest.raises(TypeError, match="list_projects has no raw pages"):
        client.raw_pages(client.list_projects)
    assert rec.count == 0


def test_every_operation_that_returns_a_page_is_paginated() -> None:
    """An operation whose result has ``items`` says how it pages, or the generic pager refuses to walk it."""
    returns_a_page = {
        name
        for name in client_surface.public_operations(_Operations)
        if isinstance(getattr(typing.get_type_hints(getattr(_Operations, name))["return"], "items", None), property)
    }
    assert returns_a_page == {f.__name__ for f in PAGINATED}
    assert len(returns_a_page) == 8
