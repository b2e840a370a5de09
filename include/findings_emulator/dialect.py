"""The real service's wire format (``--dialect real``): conversions of the reference-form data.

Code and supply-chain findings are stored already converted (generated in the dialect, so pages stay
pre-serialised bytes); :func:`finding_to_real` is idempotent, so rewrites of stored findings pass through it
again. Secrets findings, dependencies and scans are converted when served (their pages are small).
"""

from __future__ import annotations

from typing import Any

from . import timefmt

REAL = "real"

_LOCATION_KEYS = {"filePath": "file_path", "endLine": "end_line", "endColumn": "end_column"}
_RULE_KEYS = {"cweNames": "cwe_names", "owaspNames": "owasp_names", "vulnerabilityClasses": "vulnerability_classes"}
_TICKET_KEYS = {"externalSlug": "external_slug", "linkedIssueIds": "linked_issue_ids"}
_COMMENT_KEYS = {"externalDiscussionId": "external_discussion_id", "externalNoteId": "external_note_id"}
#: ``reachability`` of supply-chain findings; the ``exposures`` filter keeps the underscore names.
REACHABILITY = {"always_reachable": "always reachable", "conditionally_reachable": "conditionally reachable",
                "unknown": "no reachability analysis"}
TRANSITIVITY = {"direct": "DIRECT", "transitive": "TRANSITIVE"}
SECRET_STATUS = {"open": "FINDING_STATUS_OPEN", "fixed": "FINDING_STATUS_FIXED", "ignored": "FINDING_STATUS_IGNORED",
                 "reviewing": "FINDING_STATUS_OPEN", "fixing": "FINDING_STATUS_OPEN",
                 "provisionally_ignored": "FINDING_STATUS_PROVISIONALLY_IGNORED"}
VALIDATION = {"valid": "VALIDATION_STATE_CONFIRMED_VALID", "invalid": "VALIDATION_STATE_CONFIRMED_INVALID"}
#: Real ``validation_state`` selection values -> the emulator's stored ones (no stored value for the others).
VALIDATION_FILTER = {"confirmed_valid": "valid", "confirmed_invalid": "invalid"}
MODES = ("MODE_MONITOR", "MODE_COMMENT", "MODE_BLOCK")
#: ``assistant.component.risk``: the real service knows ``high``, ``low`` and ``neutral`` only.
COMPONENT_RISK = {"medium": "neutral"}
_MANIFESTS = {"package-lock.json": "package.json", "yarn.lock": "package.json", "pnpm-lock.yaml": "package.json",
              "poetry.lock": "pyproject.toml", "Pipfile.lock": "Pipfile", "go.sum": "go.mod",
              "Cargo.lock": "Cargo.toml", "Gemfile.lock": "Gemfile", "composer.lock": "composer.json",
              "gradle.lockfile": "build.gradle", "packages.lock.json": "packages.config"}


def _renamed(value: Any, keys: dict[str, str]) -> Any:
    if not isinstance(value, dict):
        return value  # None, or a pre-serialised fragment already in the dialect
    return {keys.get(key, key): item for key, item in value.items()}


def ticket_to_real(ticket: Any) -> Any:
    """An external ticket link in snake_case (``id`` stays an integer)."""
    return _renamed(ticket, _TICKET_KEYS)


def rule_to_real(rule: dict[str, Any]) -> dict[str, Any]:
    """A finding's ``rule`` in snake_case."""
    return dict(_renamed(rule, _RULE_KEYS))


def usage_location(location: dict[str, Any], url: str | None) -> dict[str, Any]:
    """``usage.location`` as the real service sends it (``path``, ``start_line``, ... ``url``)."""
    if "path" in location:
        return location
    return {"path": location["filePath"], "start_line": location["line"], "start_col": location["column"],
            "end_line": location["endLine"], "end_col": location["endColumn"], "url": url}


def assistant_to_real(assistant: Any) -> Any:
    """A code finding's ``assistant`` with the real service's component risks (``medium`` -> ``neutral``)."""
    if not isinstance(assistant, dict) or not isinstance(assistant.get("component"), dict):
        return assistant  # None, or a pre-serialised fragment already in the dialect
    risk = assistant["component"].get("risk")
    return {**assistant, "component": {**assistant["component"], "risk": COMPONENT_RISK.get(risk, risk)}}


def finding_to_real(body: dict[str, Any]) -> dict[str, Any]:
    """Convert a code or supply-chain finding to the real dialect, in place (idempotent); returns it."""
    if "assistant" in body:
        body["assistant"] = assistant_to_real(body["assistant"])
    body["location"] = _renamed(body.get("location"), _LOCATION_KEYS)
    body["external_ticket"] = ticket_to_real(body.get("external_ticket"))
    body["rule"] = _renamed(body.get("rule"), _RULE_KEYS)
    comments = body.get("review_comments") or []
    body["review_comments"] = [
        {**renamed, "external_note_id": str(renamed["external_note_id"])}
        if renamed.get("external_note_id") is not None else renamed
        for renamed in (_renamed(c, _COMMENT_KEYS) for c in comments)]
    if "reachability" in body:
        body["reachability"] = REACHABILITY.get(body["reachability"], body["reachability"])
        body["reachable_condition"] = body.get("reachable_condition") or None
    usage = body.get("usage")
    if isinstance(usage, dict):
        usage["external_ticket"] = ticket_to_real(usage.get("external_ticket"))
        if isinstance(usage.get("location"), dict):
            usage["location"] = usage_location(usage["location"], None)
    return body


def _upper(prefix: str, value: str | None) -> str:
    return f"{prefix}_{(value or 'unknown').upper()}"


def _timestamp(value: str | None) -> str | None:
    return None if value is None else timefmt.iso_z(timefmt.parse_iso(value))


def secret_to_real(body: dict[str, Any]) -> dict[str, Any]:
    """A secrets finding (stored in the reference form) as the real service's proto-JSON."""
    repo = body["repository"]
    location = body["location"]
    path = location.get("filePath") or location.get("file_path")
    ticket = body.get("external_ticket")
    host = repo["url"].split("/")[2].split(".")[-2] if repo["url"].count("/") >= 2 else "unknown"
    return {
        "id": str(body["id"]), "type": body["secret_type"], "findingPath": f"{path}:{location['line']}",
        "findingPathUrl": body["line_of_code_url"], "ref": body["ref"], "refUrl": f"{repo['url']}/tree/{body['ref']}",
        "ruleHashId": body["match_based_id"][:16], "mode": MODES[body["id"] % len(MODES)],
        "createdAt": _timestamp(body["created_at"]), "updatedAt": _timestamp(body["state_updated_at"]),
        "repository": {"name": repo["name"], "url": repo["url"],
                       "visibility": _upper("REPOSITORY_VISIBILITY", body.get("repository_visibility")),
                       "scmType": _upper("SCM_TYPE", host)},
        "externalTicket": None if ticket is None else {
            "id": str(ticket["id"]), "externalSlug": ticket.get("externalSlug", ticket.get("external_slug")),
            "url": ticket["url"],
            "linkedIssueIds": [str(i) for i in ticket.get("linkedIssueIds", ticket.get("linked_issue_ids", []))]},
        "severity": _upper("SEVERITY", body["severity"]), "confidence": _upper("CONFIDENCE", body["confidence"]),
        "status": SECRET_STATUS.get(body["status"], "FINDING_STATUS_UNKNOWN"),
        "validationState": VALIDATION.get(body["validation_state"], "VALIDATION_STATE_NO_VALIDATOR"),
        "reviewComments": [{"externalDiscussionId": c.get("externalDiscussionId"),
                            "externalNoteId": str(c.get("externalNoteId"))} for c in body["review_comments"]],
        "historicalInfo": {"gitCommit": body["match_based_id"][:40], "gitBlob": body["syntactic_id"][:40],
                           "gitCommitTimestamp": _timestamp(body["created_at"])} if body["historical"] else None,
        "autotriage": {"verdict": "VERDICT_NO_VERDICT"},
    }


def manifest_path(lockfile: str) -> str:
    """The manifest that goes with a lockfile (the lockfile itself when there is no separate manifest)."""
    folder, _, name = lockfile.rpartition("/")
    manifest = _MANIFESTS.get(name, name)
    return f"{folder}/{manifest}" if folder else manifest


def dependency_to_real(dep: dict[str, Any], repo_url: str, branch: str) -> dict[str, Any]:
    """A dependency of the inventory as the real service sends it: no ``id``, locations with digit strings."""
    line = dep["id"] % 400 + 1

    def code_location(path: str, start: int) -> dict[str, Any]:
        return {"path": path, "url": f"{repo_url}/blob/{branch}/{path}#L{start}",
                "committedAt": "1970-01-01T00:00:00Z", "startLine": str(start), "endLine": str(start),
                "startCol": "1", "endCol": str(len(dep["name"]) + len(dep["version"]) + 4)}

    return {
        "repositoryId": str(dep["repository_id"]),
        "package": {"name": dep["name"], "versionSpecifier": dep["version"]},
        "ecosystem": dep["ecosystem"],
        "transitivity": TRANSITIVITY.get(dep["transitivity"], "UNKNOWN_TRANSITIVITY"),
        "licenses": [lic for lic in dep["licenses"].strip("|").split("|") if lic],
        "definedAt": code_location(dep["lockfile_path"], line),
        "manifestDefinition": code_location(manifest_path(dep["lockfile_path"]), line % 40 + 1),
        "resolvedUrl": f"https://packages.example.com/{dep['ecosystem']}/{dep['name']}/{dep['version']}",
        "pathToTransitivity": [],
    }
