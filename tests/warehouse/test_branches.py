"""Which copy of a finding found on several branches is counted (``findings_provider.warehouse.branches``), on
SQLite and PostgreSQL, and what the programme's numbers then count."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from findings_provider import programme
from findings_provider.client.models import Project
from findings_provider.programme import FindingFilter
from findings_provider.warehouse import Warehouse, finding_row_from_dict
from findings_provider.warehouse.branches import primary_branches, recount, store_projects
from findings_provider.warehouse.schema import findings
from sqlalchemy import select

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)


def copy(finding_id: int, ref: str, days_ago: float, fingerprint: str | None = "fp-1", issue_type: str = "sast",
         repository: str | None = "acme/api", **fields: Any) -> tuple:
    body = {"id": finding_id, "status": "open", "severity": "high", "ref": ref, "repository": {"name": repository},
            "relevant_since": (NOW - timedelta(days=days_ago)).isoformat(), **fields}
    if repository is None:
        del body["repository"]
    if fingerprint is not None:
        body["match_based_id"] = fingerprint
    return finding_row_from_dict(issue_type, body)


def projects(warehouse: Warehouse, **primary: str) -> dict[str, int]:
    return store_projects(warehouse, [Project(name=name, primary_branch=branch) for name, branch in primary.items()],
                          now=NOW)


def counted(warehouse: Warehouse) -> dict[int, bool | None]:
    with warehouse.engine.connect() as conn:
        return {int(i): c for i, c in conn.execute(select(findings.c.id, findings.c.counted))}


def test_the_copy_on_the_primary_branch_is_counted_else_the_latest(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([
        copy(1, "main", 30), copy(2, "feature/x", 1), copy(3, "develop", 2),  # fp-1: main is primary
        copy(4, "feature/a", 5, "fp-2"), copy(5, "feature/b", 3, "fp-2"),  # fp-2: no copy on main, latest is 5
        copy(6, "feature/c", 3, "fp-3"), copy(7, "feature/d", 3, "fp-3"),  # fp-3: a tie, the highest id
        copy(8, "main", 9, "fp-1", repository="acme/web"),  # the same fingerprint in another repository
        copy(9, "feature/x", 1, None), copy(10, "main", 1, None),  # no fingerprint: each counted
    ])
    # a copy alone in its fingerprint, or without one, is stored marked: the recount has nothing to change there
    stored = counted(warehouse)
    assert [stored[i] for i in (8, 9, 10)] == [True, True, True]
    assert {stored[i] for i in (2, 3, 5, 7)} == {None}  # copies of a fingerprint already held: not marked yet
    marks = projects(warehouse, **{"acme/api": "main", "acme/web": "main"})
    assert counted(warehouse) == {1: True, 2: False, 3: False, 4: False, 5: True, 6: False, 7: True, 8: True,
                                  9: True, 10: True}
    assert marks == {"projects": 2, "recounted": sum(stored[i] is not c for i, c in counted(warehouse).items())}


def test_secrets_are_counted_on_every_branch(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([
        finding_row_from_dict("secrets", {"id": str(i), "ref": ref, "ruleHashId": "same",
                                          "status": "FINDING_STATUS_OPEN", "repository": {"name": "acme/api"}})
        for i, ref in ((11, "main"), (12, "dev"))
    ])
    with warehouse.engine.begin() as conn:
        recount(conn, everything=True)
    assert counted(warehouse) == {11: True, 12: True}


def test_a_new_primary_branch_moves_the_count_and_a_new_copy_takes_it_when_stored(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([copy(1, "main", 30), copy(2, "develop", 1)])
    projects(warehouse, **{"acme/api": "main"})
    assert counted(warehouse) == {1: True, 2: False}
    # the project's primary branch changed in the service
    assert projects(warehouse, **{"acme/api": "develop"})["recounted"] == 2
    assert counted(warehouse) == {1: False, 2: True}
    # listed again, unchanged: nothing to write
    assert projects(warehouse, **{"acme/api": "develop"})["recounted"] == 0
    # a copy stored later is unmarked (counted until recounted), and the recount looks at its fingerprint only
    warehouse.upsert_findings([copy(3, "develop", 0), copy(4, "main", 0, "fp-9")])
    assert counted(warehouse)[3] is None
    with warehouse.engine.begin() as conn:
        assert recount(conn) == 2  # 2 loses the count to 3 (same branch, later); 4, alone, was stored marked
    assert counted(warehouse) == {1: False, 2: False, 3: True, 4: True}


def test_a_project_no_longer_listed_is_forgotten(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([copy(1, "main", 30), copy(2, "develop", 1)])
    projects(warehouse, **{"acme/api": "main", "acme/old": "trunk"})
    assert projects(warehouse, **{"acme/old": "trunk"})["recounted"] == 2  # acme/api's primary branch unknown now
    assert counted(warehouse) == {1: False, 2: True}  # the latest copy


def test_the_programme_counts_one_copy_unless_a_page_asks_for_every_branch(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([copy(1, "main", 30, severity="critical"), copy(2, "develop", 1, severity="critical"),
                               copy(3, "main", 1, "fp-2", status="fixed"), copy(4, "feature/x", 1, "fp-2")])
    projects(warehouse, **{"acme/api": "main"})
    with warehouse.engine.connect() as conn:
        one = programme.count(conn, FindingFilter(measure="open"), {}, NOW)
        every = programme.count(conn, FindingFilter(measure="open", branches="all"), {}, NOW)
        critical = programme.counts_by_severity(conn, "open", {}, NOW)
        fixed = programme.count(conn, FindingFilter(measure="fixed"), {}, NOW)
    # fp-2 is fixed on the primary branch: the service counts it fixed, though a feature branch's copy is open
    assert (one, every, critical, fixed) == (1, 3, {"critical": 1}, 1)
    # a run's own findings (touched) are listed with every copy it wrote
    touched = FindingFilter(run_id="r", touched="triage").where({}, NOW, {"sast": {2}})
    with warehouse.engine.connect() as conn:
        assert conn.execute(select(findings.c.id).where(*touched)).scalars().all() == [2]
    with pytest.raises(ValueError, match="branches = 'some'"):
        FindingFilter(branches="some")


def test_the_answer_of_a_change_replaces_only_its_projects_rows(warehouse: Warehouse) -> None:
    warehouse.upsert_findings([copy(1, "main", 30), copy(2, "develop", 1)])
    projects(warehouse, **{"acme/api": "main", "acme/web": "trunk"})
    changed = store_projects(warehouse, [Project(name="acme/api", primary_branch="develop")], complete=False,
                             now=NOW)
    assert changed == {"projects": 1, "recounted": 2}  # the new primary branch moves the count at once
    with warehouse.engine.connect() as conn:
        assert primary_branches(conn) == {"acme/api": "develop", "acme/web": "trunk"}  # acme/web kept
    assert counted(warehouse) == {1: False, 2: True}


def test_marks_stored_with_new_copies_then_recounted_equal_a_recount_from_scratch(warehouse: Warehouse) -> None:
    """A new copy is stored marked when it is alone in its fingerprint; whatever the pages, the recount after them
    gives the marks a recount of every copy from scratch gives."""
    pages = [
        [copy(1, "main", 30), copy(2, "dev", 1), copy(3, "x", 2, "fp-2"),
         copy(4, "y", 9, "fp-3", repository="acme/lib"), copy(5, "z", 1, "fp-3", repository="acme/lib"),
         copy(6, "main", 1, ""), copy(7, "main", 5, "fp-4")],
        [copy(8, "dev", 0, "fp-2"), copy(9, "w", 0, "fp-3", repository="acme/lib"), copy(10, "main", 3, "fp-5"),
         copy(11, "dev", 2, "fp-4", repository="acme/web"), copy(1, "main", 30, status="fixed")],
        [finding_row_from_dict("secrets", {"id": "12", "ref": "main", "ruleHashId": "h",
                                           "repository": {"name": "acme/api"}}), copy(13, "main", 8, "fp-5")],
    ]
    projects(warehouse, **{"acme/api": "main"})
    for page in pages:
        warehouse.upsert_findings(page)
        with warehouse.engine.begin() as conn:
            recount(conn)
    incremental = counted(warehouse)
    assert None not in incremental.values()
    with warehouse.engine.begin() as conn:
        conn.execute(findings.update().values(counted=None))
        recount(conn, everything=True)
    assert counted(warehouse) == incremental
    assert incremental == {1: True, 2: False, 3: False, 4: False, 5: False, 6: True, 7: True, 8: True, 9: True,
                           10: True, 11: True, 12: True, 13: False}


def test_a_new_copy_that_a_counted_copy_ranks_before_is_stored_not_counted(warehouse: Warehouse) -> None:
    """Both dialects decide it in the insert (SQLite in SQL, PostgreSQL in ``branches.marks_on_insert``); a copy
    that would take the count is left unmarked, for the recount."""
    projects(warehouse, **{"acme/api": "main"})
    warehouse.upsert_findings([copy(1, "dev", 1)])  # alone in its fingerprint: the counted copy
    warehouse.upsert_findings([copy(2, "dev", 5)])  # detected before 1, same rank of branch: 1 keeps the count
    warehouse.upsert_findings([copy(3, "main", 9)])  # on the primary branch: it takes the count, at the recount
    warehouse.upsert_findings([copy(4, "dev", 1)])  # detected with 1, a higher id: it takes the count, too
    assert counted(warehouse) == {1: True, 2: False, 3: None, 4: None}
    with warehouse.engine.begin() as conn:
        # 1 loses the count to 3; 4 is not counted; 2 keeps its mark
        assert recount(conn) == 3
    assert counted(warehouse) == {1: False, 2: False, 3: True, 4: False}


def test_marks_stored_page_by_page_then_recounted_once_equal_a_recount_from_scratch(warehouse: Warehouse) -> None:
    """Whatever copies arrive in whatever pages, the marks stored with them and one recount after the last page
    give what a recount of every copy from scratch gives (the extraction's order: pages, then one recount)."""
    import random

    chance = random.Random(28)
    branches = ("main", "dev", "feature/x", "release")
    rows = [copy(i, chance.choice(branches), chance.choice((0, 1, 1, 2, 5, 9)), f"fp-{chance.randrange(12)}",
                 repository=chance.choice(("acme/api", "acme/web", "acme/lib")))
            for i in range(1, 121)]
    chance.shuffle(rows)
    projects(warehouse, **{"acme/api": "main", "acme/web": "dev"})  # acme/lib: no primary branch known
    for start in range(0, len(rows), 7):
        warehouse.upsert_findings(rows[start:start + 7])
    at_insert = counted(warehouse)
    assert False in at_insert.values()  # some copies are decided not counted when stored
    with warehouse.engine.begin() as conn:
        recount(conn)
    incremental = counted(warehouse)
    assert all(incremental[i] is mark for i, mark in at_insert.items() if mark is False)
    with warehouse.engine.begin() as conn:
        conn.execute(findings.update().values(counted=None))
        recount(conn, everything=True)
    assert counted(warehouse) == incremental


def test_new_copies_are_stored_marked_by_the_rule_before_any_recount(warehouse: Warehouse) -> None:
    """The mark a new copy is inserted with (both dialects: SQLite's SQL row by row, PostgreSQL's ``COPY`` of new
    rows from ``branches.marks_on_insert``): true when always counted or no copy of its fingerprint is stored (a
    NULL repository equals a NULL repository only); NULL otherwise (no project: no copy outranks another by its
    branch, and these copies are detected at the same time, the higher id later in the page). Each row sees the
    page's rows before it as stored (SQLite inserts row by row)."""
    first_in_page = True
    secret = finding_row_from_dict("secrets", {"id": "20", "ref": "dev", "ruleHashId": "h",
                                               "repository": {"name": "acme/api"}})
    warehouse.upsert_findings([
        copy(1, "main", 1, "fp-1"), copy(2, "a", 1, "fp-2"), copy(3, "b", 1, "fp-2"), copy(4, "main", 1, None),
        copy(5, "main", 1, ""), copy(6, "main", 1, "fp-6", repository=None), copy(11, "main", 1, "fp-9"),
        finding_row_from_dict("secrets", {"id": "19", "ref": "main", "ruleHashId": "h",
                                          "repository": {"name": "acme/api"}}),
    ])
    assert counted(warehouse) == {1: True, 2: first_in_page, 3: None, 4: True, 5: True, 6: True, 11: True, 19: True}
    warehouse.upsert_findings([
        copy(7, "dev", 1, "fp-1"),  # a copy of 1, stored
        copy(8, "dev", 1, "fp-6", repository=None),  # a copy of 6 (NULL repository), stored
        copy(9, "x", 1, "fp-6", repository="acme/other"),  # fp-6 of another repository: alone
        copy(10, "dev", 1, "fp-9", repository=None),  # fp-9 is stored for acme/api only: alone
        copy(12, "dev", 1, "fp-12"), copy(13, "main", 1, "fp-12"),  # two copies in the page
        copy(14, "main", 1, "fp-14"), secret,
    ])
    assert counted(warehouse) == {1: True, 2: first_in_page, 3: None, 4: True, 5: True, 6: True, 11: True, 19: True,
                                  7: None, 8: None, 9: True, 10: True, 12: first_in_page, 13: None, 14: True, 20: True}


def test_a_stored_copy_on_another_branch_detected_again_or_with_another_fingerprint_is_recounted(
        warehouse: Warehouse) -> None:
    """An upsert that changes a stored copy's branch, detection time or fingerprint unmarks it, and a counted copy
    that leaves its fingerprint unmarks the copies it leaves: the recount after the pull ranks both fingerprints."""
    projects(warehouse, **{"acme/api": "main"})
    warehouse.upsert_findings([copy(1, "main", 30), copy(2, "dev", 1),  # fp-1: 1 on the primary branch
                               copy(3, "a", 5, "fp-2"), copy(4, "b", 3, "fp-2"),  # fp-2: 4 the latest
                               copy(5, "c", 1, "fp-3"), copy(6, "d", 2, "fp-3"),  # fp-3: 5 the latest
                               copy(7, "e", 1, "fp-4", repository=None), copy(8, "f", 2, "fp-4", repository=None)])
    with warehouse.engine.begin() as conn:
        recount(conn)
    assert counted(warehouse) == {1: True, 2: False, 3: False, 4: True, 5: True, 6: False, 7: True, 8: False}
    # 2 is found on the primary branch now, detected after 1; 3 is detected again today; 5 and 7 (NULL repository)
    # have another fingerprint now, leaving 6 and 8 alone in theirs
    warehouse.upsert_findings([copy(2, "main", 0), copy(3, "a", 0, "fp-2"), copy(5, "c", 1, "fp-2"),
                               copy(7, "e", 1, "fp-5", repository=None)])
    assert {i for i, mark in counted(warehouse).items() if mark is None} == {2, 3, 5, 6, 7, 8}
    with warehouse.engine.begin() as conn:
        recount(conn)
    assert counted(warehouse) == {1: False, 2: True, 3: True, 4: False, 5: False, 6: True, 7: True, 8: True}
    # a copy not counted that leaves its fingerprint leaves the counted one counted
    warehouse.upsert_findings([copy(4, "b", 3, "fp-6")])
    assert {i for i, mark in counted(warehouse).items() if mark is None} == {4}


def expected_marks(warehouse: Warehouse) -> dict[int, bool]:
    """The counted marks by the module's rule computed here from the stored copies (``branches.rank``): the best
    ranked copy of each fingerprint, every copy that is always counted."""
    from findings_provider.warehouse.branches import always_counted, rank
    from findings_provider.warehouse.timestamps import utc_text

    with warehouse.engine.connect() as conn:
        primary = primary_branches(conn)
        stored = conn.execute(select(findings.c.issue_type, findings.c.id, findings.c.repository_name,
                                     findings.c.match_based_id, findings.c.ref, findings.c.relevant_since)).all()
    ranked = {int(ident): ((issue_type, repository, fingerprint), always_counted(issue_type, fingerprint),
                           rank(ref, utc_text(since), int(ident), primary.get(repository)))
              for issue_type, ident, repository, fingerprint, ref, since in stored}
    best: dict[tuple, tuple] = {}
    for key, _, mine in ranked.values():
        best[key] = max(best.get(key, mine), mine)
    return {ident: always or best[key] == mine for ident, (key, always, mine) in ranked.items()}


def test_copies_changed_in_every_way_page_by_page_are_exact_after_each_pulls_recount(warehouse: Warehouse) -> None:
    """Rounds of pulls in which stored copies move to other branches, detection times, fingerprints and
    repositories (NULL included): after each round's one recount, every mark is the rule's."""
    import random

    chance = random.Random(91)

    def any_copy(ident: int) -> tuple:
        return copy(ident, chance.choice(("main", "dev", "feature/x")), chance.choice((0, 1, 2, 5)),
                    chance.choice((*(f"fp-{n}" for n in range(6)), None)),
                    repository=chance.choice(("acme/api", "acme/web", None)))

    projects(warehouse, **{"acme/api": "main", "acme/web": "dev"})
    rows = [any_copy(i) for i in range(1, 91)]
    for round_ in range(4):
        for start in range(0, len(rows), 9):
            warehouse.upsert_findings(rows[start:start + 9])
        with warehouse.engine.begin() as conn:
            recount(conn)
        assert counted(warehouse) == expected_marks(warehouse), f"round {round_}"
        rows = [any_copy(i) for i in chance.sample(range(1, 91), 30)]


@pytest.mark.parametrize("primary", [{}, {"acme/api": "main", "acme/web": "dev"}])
def test_both_dialects_store_the_same_marks_for_the_same_pages(
        sqlite_engine, postgresql_engine, primary: dict[str, str]) -> None:
    """The mark rule is one: SQLite's SQL (``branches.counted_on_insert``) and PostgreSQL's Python
    (``branches.marks_on_insert``) store the same marks, true, false and NULL, page after page (with copies
    changed in later pages, NULL repositories and ids in any order), and a recount then changes the same rows."""
    import random

    chance = random.Random(85)
    branches = ("main", "dev", "feature/x")
    rows = [copy(i, chance.choice(branches), chance.choice((0, 1, 1, 2, 5)), f"fp-{chance.randrange(9)}",
                 repository=chance.choice(("acme/api", "acme/web", None)))
            for i in range(1, 151)]
    chance.shuffle(rows)
    rows += [copy(i, "main", 0, f"fp-{i % 9}", repository="acme/api", status="fixed") for i in range(1, 151, 10)]
    marks, recounted = [], []
    for engine in (sqlite_engine, postgresql_engine):
        warehouse = Warehouse(engine)
        warehouse.create_all()
        projects(warehouse, **primary)
        stored_marks = []
        for start in range(0, len(rows), 11):
            warehouse.upsert_findings(rows[start:start + 11])
            stored_marks.append(counted(warehouse))
        with engine.begin() as conn:
            recounted.append(recount(conn))
        stored_marks.append(counted(warehouse))
        marks.append(stored_marks)
    assert marks[0] == marks[1]
    assert recounted[0] == recounted[1]
    assert {False, None} <= set(marks[0][-2].values())  # both cases occur before the recount


def test_listings_stored_at_once_by_several_tasks_are_stored_one_after_the_other(engine) -> None:
    """Two tasks storing the projects listing at once (an extraction beside the ``project_settings`` plan) each
    replace the table: neither fails on ``projects``' key, and the table holds one listing."""
    import threading

    Warehouse(engine).create_all()
    listing = [Project(name=f"acme/{n}", primary_branch="main") for n in range(200)]
    errors: list[BaseException] = []

    def store(start: threading.Barrier) -> None:
        start.wait()
        try:
            store_projects(Warehouse(engine), listing, now=NOW)
        except BaseException as error:
            errors.append(error)

    for _ in range(8):
        start = threading.Barrier(3)
        tasks = [threading.Thread(target=store, args=(start,)) for _ in range(3)]
        for task in tasks:
            task.start()
        for task in tasks:
            task.join()
    assert errors == []
    with engine.connect() as conn:
        assert primary_branches(conn) == {p.name: "main" for p in listing}


def test_the_fingerprints_sent_to_postgresql_as_text_arrays_arrive_unchanged(postgresql_engine) -> None:
    """``branches._text_array``: quotes, backslashes, commas, braces, blanks, ``NULL`` and non-ASCII text arrive as
    they were sent (the probe of stored copies matches them by equality)."""
    from findings_provider.warehouse.branches import _text_array

    cases = [[], ["fp-1"], ['a"b', "c\\d", "", "{x}", "a,b", " padded ", "NULL", 'é\\"', "plain"]]
    with postgresql_engine.connect() as conn:
        for values in cases:
            sent = conn.exec_driver_sql("SELECT CAST(%(a)s AS text[])", {"a": _text_array(values)}).scalar_one()
            assert sent == values
