"""Values the warehouse cannot hold: reported, nulled or skipped, never a failed page, on SQLite and PostgreSQL."""

from __future__ import annotations

import httpx
import msgspec
import orjson
import pytest
from findings_provider.client import FindingsClient, RetryPolicy
from findings_provider.pipeline import extraction
from findings_provider.warehouse import FINDING_COLUMNS, Rejection, finding_row_from_dict, finding_rows
from findings_provider.warehouse.rows import (
    NO_ID,
    NOT_UTF8,
    NUL_CHARACTER,
    OUT_OF_RANGE,
    content_digest,
    screened_findings,
)
from findings_provider.warehouse.schema import findings
from sqlalchemy import select

BIG = 2**64 + 5
# One finding of each kind, as the service's bytes: a NUL escape, integers beyond BIGINT (a JSON number and a
# digit string), an id beyond BIGINT, no usable id, invalid UTF-8, and two plain findings.
ITEMS = [
    b'{"id": 1, "rule_name": "a\\u0000b", "repository": {"name": "acme/\\u0000"}, "status": "open"}',
    b'{"id": 2, "external_ticket": {"id": %d}, "first_seen_scan_id": "-%d"}' % (2**63, 2**63 + 1),
    b'{"id": %d, "status": "open"}' % BIG,
    b'{"id": "n/a", "status": "open"}',
    b'{"id": 3, "status": "op\xffen"}',
    b'{"id": 4, "status": "open", "rule_name": "literal \\\\u0000 is not a NUL"}',
    b'{"id": 5, "status": "open", "first_seen_scan_id": %d}' % (2**63 - 1),
]


def column(row: tuple, name: str):
    return row[FINDING_COLUMNS.index(name)]


def test_rows_null_what_cannot_be_held_skip_unusable_keys_and_say_why() -> None:
    rejected: list[Rejection] = []
    rows = {row[1]: row for row in finding_rows("sast", [msgspec.Raw(item) for item in ITEMS], rejected)}

    assert set(rows) == {1, 2, 4, 5}
    assert (column(rows[1], "rule_name"), column(rows[1], "repository_name"), column(rows[1], "status")) == (
        None, None, "open",
    )
    assert column(rows[1], "raw") == ITEMS[0].decode()  # raw is kept byte for byte, escape included
    assert (column(rows[2], "external_ticket_id"), column(rows[2], "first_seen_scan_id")) == (None, None)
    assert column(rows[4], "rule_name") == "literal \\u0000 is not a NUL"
    assert column(rows[5], "first_seen_scan_id") == 2**63 - 1
    assert len(rejected) == 7
    assert set(rejected) == {
        Rejection("sast", 1, "repository_name", NUL_CHARACTER, skipped=False),
        Rejection("sast", 1, "rule_name", NUL_CHARACTER, skipped=False),
        Rejection("sast", 2, "external_ticket_id", OUT_OF_RANGE, skipped=False),
        Rejection("sast", 2, "first_seen_scan_id", OUT_OF_RANGE, skipped=False),
        Rejection("sast", str(BIG), "id", OUT_OF_RANGE, skipped=True),
        Rejection("sast", None, "id", NO_ID, skipped=True),
        Rejection("sast", 3, "raw", NOT_UTF8, skipped=True),
    }


def test_without_a_list_to_report_to_an_unusable_key_raises_and_other_values_are_nulled() -> None:
    with pytest.raises(ValueError, match="sast finding has integer beyond the 64-bit range"):
        finding_rows("sast", [msgspec.Raw(ITEMS[2])])
    with pytest.raises(ValueError, match="sast finding is not valid UTF-8 JSON"):
        finding_rows("sast", [msgspec.Raw(ITEMS[4])])
    with pytest.raises(ValueError, match="sast finding has integer beyond the 64-bit range"):
        finding_row_from_dict("sast", {"id": 2**63})
    row = finding_row_from_dict("sca", {"id": 7, "severity": "hi\x00gh", "first_seen_scan_id": 2**64 - 1})
    assert (column(row, "severity"), column(row, "first_seen_scan_id")) == (None, None)
    assert orjson.loads(column(row, "raw"))["severity"] == "hi\x00gh"


def test_the_store_holds_every_row_that_was_built(warehouse, engine) -> None:
    rows = finding_rows("sast", [msgspec.Raw(item) for item in ITEMS], [])
    assert warehouse.upsert_findings(rows) == 4
    with engine.connect() as conn:
        stored = {r.id: r for r in conn.execute(select(findings))}
    assert set(stored) == {1, 2, 4, 5}
    assert stored[1].raw == ITEMS[0].decode()
    assert stored[5].first_seen_scan_id == 2**63 - 1
    assert warehouse.upsert_findings(rows) == 0  # and an unchanged re-sync writes nothing


def page_client(pages: list[list[bytes]]) -> FindingsClient:
    """A client whose findings endpoint serves ``pages`` (lists of items as bytes), then an empty page."""

    def serve(request: httpx.Request) -> httpx.Response:
        number = int(request.url.params.get("page", 0))
        items = pages[number] if number < len(pages) else []
        return httpx.Response(200, content=b'{"findings": [' + b", ".join(items) + b"]}",
                              headers={"content-type": "application/json"})

    return FindingsClient("https://api.test", "t0ken-value", deployment_id="1", deployment_slug="acme",
                          transport=httpx.MockTransport(serve), retry_policy=RetryPolicy(max_retries=0))


def test_a_pull_loads_the_rest_of_each_page_and_reports_the_rest(warehouse, engine) -> None:
    plain = [b'{"id": %d, "status": "open", "relevant_since": "2026-11-18T10:00:00Z"}' % i for i in range(10, 203)]
    pages = [[*plain[:96], *ITEMS[:4]], [*ITEMS[4:], *plain[96:]]]  # two full pages of 100
    with page_client(pages) as client:
        result = extraction.extract_findings(client, warehouse, "sast", since=None, page_size=100)

    assert warehouse.count_findings("sast") == 4 + 193
    assert (result.pages, result.received, result.unique, result.rejected, result.skipped) == (3, 200, 197, 7, 3)
    assert len(result.rejected_sample) == 7
    assert {"id": None, "field": "id", "reason": NO_ID, "action": "finding skipped"} in result.rejected_sample
    assert result.watermark == "2026-11-18 10:00:00.000000+00:00"


@pytest.mark.parametrize("plain_first", [True, False], ids=["problem-page", "plain-page"])
def test_a_screened_page_keeps_reports_and_builds_what_the_full_path_does(plain_first) -> None:
    """``screened_findings`` (the re-sync's preparation: ids, dates and digests without rows) keeps the findings
    ``finding_rows`` keeps, with the same ids, ``relevant_since`` and digests, reports the same rejected values, and
    builds the same rows; on a page of plain findings (decided for the page as a whole) and on one with every kind
    of value the warehouse cannot hold (decided finding by finding)."""
    plain = [b'{"id": %d, "status": "open", "createdAt": "2026-11-18T10:00:%02d+01:00", '
             b'"externalTicket": {"id": "%d"}, "rule_message": "caf\xc3\xa9"}' % (i, i, i * 7) for i in range(10, 40)]
    items = [msgspec.Raw(item) for item in (plain if plain_first else [*plain[:5], *ITEMS, *plain[5:]])]
    expected: list[Rejection] = []
    rows = finding_rows("sast", items, expected)
    rejected: list[Rejection] = []

    screened = screened_findings("sast", items, rejected)

    assert sorted(rejected, key=repr) == sorted(expected, key=repr)  # (in page order: the full path's differs)
    assert len(expected) == (0 if plain_first else 7)
    assert screened.ids == [column(row, "id") for row in rows]
    assert screened.dates == [column(row, "relevant_since") for row in rows]
    assert screened.dates[0] == "2026-11-18 09:00:10.000000+00:00"
    assert screened.digests == [content_digest(column(row, "raw")) for row in rows]
    assert screened.rows(range(len(rows))) == rows
    assert screened.rows([3, 0]) == [rows[3], rows[0]]
    # the rows of findings that hold a value the warehouse cannot are built by the screen, the others on demand
    # (4 holds the text of the escape, not a NUL: built as well, a harmless false alarm)
    assert {column(row, "id") for row in screened.built.values()} == (set() if plain_first else {1, 2, 4})
