"""Test doubles of the pipeline tests: API findings and a small in-memory API for ``httpx.MockTransport``."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
from findings_provider.client import FindingsClient, RetryPolicy

NOW = datetime(2026, 11, 18, 12, 0, tzinfo=timezone.utc)


def finding(
    finding_id: int,
    *,
    minutes_ago: float = 0,
    status: str = "open",
    verdict: str | None = None,
    severity: str = "high",
    repo: str = "acme/api",
    rule: str = "rule.a",
    reachability: str | None = None,
    ticket: int | None = None,
    now: datetime = NOW,
) -> dict[str, Any]:
    """A finding as the API sends it (only the fields the pipeline reads, plus a few)."""
    data: dict[str, Any] = {
        "id": finding_id,
        "ref": "main",
        "repository": {"name": repo, "url": f"https://git.example.com/{repo}"},
        "rule_name": rule,
        "severity": severity,
        "confidence": "high",
        "status": status,
        "triage_state": "untriaged",
        "relevant_since": (now - timedelta(minutes=minutes_ago)).isoformat(),
        "first_seen_scan_id": 7,
        "match_based_id": f"fp-{finding_id}",
    }
    if verdict:
        data["assistant"] = {"autotriage": {"verdict": verdict, "reason": "because"}}
    if reachability:
        data["reachability"] = reachability
    if ticket:
        data["external_ticket"] = {"id": ticket, "url": f"https://tracker/{ticket}"}
    return data


class FakeApi:
    """A small in-memory API for ``httpx.MockTransport``: findings (offset pages, ``since``), secrets (cursor),
    bulk triage and tickets (overridable), scan search and details. Every request is recorded."""

    def __init__(self) -> None:
        self.findings: dict[str, list[dict[str, Any]]] = {"sast": [], "sca": [], "secrets": []}
        self.scans: list[dict[str, Any]] = []
        self.scan_details: dict[str, dict[str, Any]] = {}
        self.requests: list[httpx.Request] = []
        self.fail_findings_page: int | None = None
        self.tickets_handler: Callable[[dict[str, Any]], httpx.Response] | None = None
        self.next_ticket = 100

    # -- helpers ----------------------------------------------------------------------------------------------

    def calls(self, suffix: str, method: str | None = None) -> list[httpx.Request]:
        return [r for r in self.requests if r.url.path.endswith(suffix) and (method is None or r.method == method)]

    def by_id(self, issue_type: str, finding_id: int) -> dict[str, Any]:
        return next(f for f in self.findings[issue_type] if f["id"] == finding_id)

    def client(self) -> FindingsClient:
        return FindingsClient(
            "https://api.test", "t0ken-value", deployment_id="1", deployment_slug="acme",
            transport=httpx.MockTransport(self), retry_policy=RetryPolicy(max_retries=0),
        )

    # -- routing ----------------------------------------------------------------------------------------------

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        path = request.url.path
        body: Any = json.loads(request.content) if request.content else None
        if path.endswith("/findings"):
            return self._findings(request)
        if path.endswith("/secrets"):
            return self._secrets(request)
        if path.endswith("/triage"):
            return self._triage(body)
        if path.endswith("/tickets"):
            return self.tickets_handler(body) if self.tickets_handler else self.create_tickets(body)
        if path.endswith("/scans/search"):
            return httpx.Response(200, json={"scans": self.scans, "cursor": None})
        if "/scan/" in path:
            scan_id = path.rsplit("/", 1)[1]
            if scan_id not in self.scan_details:
                return httpx.Response(404, json={"error": "no such scan"})
            return httpx.Response(200, json=self.scan_details[scan_id])
        return httpx.Response(404, json={"error": f"no route {path}"})

    def _findings(self, request: httpx.Request) -> httpx.Response:
        q = request.url.params
        issue_type = q.get("issue_type", "sast")
        page, size = int(q.get("page", 0)), int(q.get("page_size", 100))
        if self.fail_findings_page is not None and page == self.fail_findings_page:
            return httpx.Response(400, json={"error": "injected failure"})
        items = sorted(self.findings[issue_type], key=lambda f: f["relevant_since"], reverse=True)
        if "since" in q:
            since = float(q["since"])
            items = [f for f in items if datetime.fromisoformat(f["relevant_since"]).timestamp() >= since]
        repos = q.get_list("repos")
        if repos:
            items = [f for f in items if f["repository"]["name"] in repos]
        chunk = items[page * size : (page + 1) * size]
        key = "sastFindings" if issue_type == "sast" else "scaFindings"
        return httpx.Response(200, json={key: {"findings": chunk}})

    def _secrets(self, request: httpx.Request) -> httpx.Response:
        limit = int(request.url.params.get("limit", 100))
        start = int(request.url.params.get("cursor") or 0)
        chunk = self.findings["secrets"][start : start + limit]
        nxt = start + limit if start + limit < len(self.findings["secrets"]) else None
        return httpx.Response(200, json={"secrets": chunk, "cursor": str(nxt) if nxt else None})

    def _triage(self, body: dict[str, Any]) -> httpx.Response:
        issue_type = body["issue_type"]
        ids = list(body["issue_ids"])
        selected = [f for f in self.findings[issue_type] if f["id"] in ids]
        mates = [
            f for f in self.findings[issue_type]
            if f["id"] not in ids and any(f["match_based_id"] == s["match_based_id"] for s in selected)
        ]
        status = {"ignored": "ignored", "reopened": "open"}.get(body["new_triage_state"], body["new_triage_state"])
        for f in selected + mates:
            f.update(status=status, triage_state=body["new_triage_state"], triage_reason=body.get("new_triage_reason"))
        triaged = [f["id"] for f in selected + mates]
        return httpx.Response(200, json={"num_triaged": len(triaged), "triaged_issues": triaged})

    def create_tickets(self, body: dict[str, Any]) -> httpx.Response:
        """Group by (repository, rule), up to ``limit`` tickets; ticketed findings are skipped."""
        issue_type = body["issue_type"]
        ids = [int(i) for i in body["issue_ids"]]
        groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
        skipped = []
        for f in self.findings[issue_type]:
            if f["id"] not in ids:
                continue
            if f.get("external_ticket"):
                skipped.append(f["id"])
                continue
            groups.setdefault((f["repository"]["name"], f["rule_name"]), []).append(f)
        succeeded, failed = [], []
        for index, members in enumerate(groups.values()):
            member_ids = [m["id"] for m in members]
            if index >= body.get("limit", 20):
                failed.append({"error": "ticket limit exceeded", "issue_ids": member_ids})
                continue
            self.next_ticket += 1
            ticket = {"id": self.next_ticket, "url": f"https://tracker/T-{self.next_ticket}",
                      "externalSlug": f"T-{self.next_ticket}", "linkedIssueIds": member_ids}
            for m in members:
                m["external_ticket"] = ticket
            succeeded.append({"ticket_id": self.next_ticket, "ticket_url": ticket["url"],
                              "external_slug": ticket["externalSlug"], "issue_ids": member_ids})
        out: dict[str, Any] = {"succeeded": succeeded, "failed": failed, "skipped": []}
        if skipped:
            out["skipped"] = [{"reason": "already linked to an external ticket", "issue_ids": skipped}]
        return httpx.Response(200, json=out)
