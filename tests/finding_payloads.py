"""Findings as the service sends them, one of each issue type, as the warehouse's migration tests store them
(``test_versioning.py``, ``test_migrate.py``, ``test_warehouse_fill.py``)."""

from __future__ import annotations

from typing import Any

import msgspec
import orjson
from findings_provider.client.canonical import FINDING_FIELDS, SYNONYMS, VOCABULARIES

SECRET = {
    "id": "691234", "type": "AWS access key", "findingPath": "config/aws.py:3", "createdAt": "2024-07-11T20:46:25Z",
    "repository": {"name": "acme/infra"}, "status": "FINDING_STATUS_OPEN",
    "validationState": "VALIDATION_STATE_CONFIRMED_VALID",
}
SAST = {"id": 17, "location": {"filePath": "src/db.py", "line": 4}, "status": "open", "severity": "high",
        "repository": {"name": "acme/web"}, "rule": {"name": "python.sqli"}, "created_at": "2024-05-01T10:00:00Z"}
SCA = {"id": 18, "usage": {"location": {"path": "web/package.json", "start_line": 9}}, "status": "open",
       "severity": "critical", "external_ticket_id": 99}
AI_SAST = {"id": 19, "location": {"filePath": "src/ai.py"}, "status": "open", "severity": "medium",
           "triage_state": "untriaged", "triaged_at": "2024-06-01T08:00:00.123456Z"}
#: One finding of each of these issue types, by issue type.
ITEMS: dict[str, dict[str, Any]] = {"secrets": SECRET, "sast": SAST, "sca": SCA, "ai_sast": AI_SAST}


def raw(item: dict[str, Any]) -> msgspec.Raw:
    """``item`` as the bytes a page carries (what ``finding_rows`` takes)."""
    return msgspec.Raw(orjson.dumps(item))


def every_field(finding_id: int) -> dict[str, Any]:
    """A finding with a value at the first source path of every field of ``canonical.FINDING_FIELDS`` (so every
    finding column read from the API, a new one included, is set): a valid value of each field's kind."""
    item: dict[str, Any] = {}
    for number, (field, (kind, paths)) in enumerate(sorted(FINDING_FIELDS.items())):
        if kind == "id":
            value: Any = finding_id if field == "id" else 1000 + number
        elif kind == "timestamp":
            value = f"2024-03-01T10:{number:02d}:00Z"
        elif kind == "file_path":
            value = f"src/{field}.py"
        elif kind in VOCABULARIES:
            value = min(v for v in VOCABULARIES[kind][0] if v not in SYNONYMS.get(kind, {}))
        else:
            value = f"{field} value"
        *parents, leaf = paths[0]
        node = item
        for key in parents:
            node = node.setdefault(key, {})
        assert leaf not in node, f"two fields at {paths[0]}"
        node[leaf] = value
    return item
