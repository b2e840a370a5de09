"""The canonical form of findings and secrets: one table of fields, their source keys and their normalisers.

The service speaks two dialects (``docs/canonical.md``): the API reference's (camelCase sub-objects, lowercase
enums, integer ids) and the real service's (snake_case inside findings; proto-JSON secrets with camelCase keys,
``PREFIX_VALUE`` enums and digit-string ids). ``FINDING_FIELDS`` says, once, where each canonical value comes
from; both the typed models (``models.Finding``) and the warehouse's fast row path (``warehouse.rows``) read the
object through the partial structs generated from it and the same normalisers, so they cannot disagree.

An enum value nobody knows yet is kept as received (never a parse failure) and logged once per run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum
from typing import Any

import msgspec

from findings_provider.client.vocabulary import (
    CODE_TYPES,
    AutotriageVerdict,
    Confidence,
    FindingStatus,
    IssueType,
    Reachability,
    Severity,
    TriageReason,
    TriageState,
    ValidationState,
)

log = logging.getLogger(__name__)

#: Issue types the findings extraction can pull (the values of ``IssueType``).
ISSUE_TYPES: tuple[str, ...] = tuple(t.value for t in IssueType)
#: Issue types listed through the findings operation (offset pages, ``since`` filter); secrets use a cursor.
OFFSET_TYPES: tuple[str, ...] = CODE_TYPES

# --- enum vocabularies ------------------------------------------------------------------------------------------


def _words(vocabulary: type[Enum], *received: str) -> frozenset[str]:
    """The values of ``vocabulary`` and the words the service sends beyond them (``received``)."""
    return frozenset({member.value for member in vocabulary} | set(received))


#: Canonical (lowercase, underscores) values per enum kind, and the proto prefixes the real dialect puts before them.
#: Reads see a few words requests never send: a ``removed`` or ``unknown`` status, an ``untriaged`` state.
VOCABULARIES: dict[str, tuple[frozenset[str], tuple[str, ...]]] = {
    "severity": (_words(Severity), ("SEVERITY_",)),
    "confidence": (_words(Confidence), ("CONFIDENCE_",)),
    "status": (_words(FindingStatus, "removed", "unknown"), ("FINDING_STATUS_",)),
    "triage_state": (_words(TriageState, "untriaged"), ("TRIAGE_STATE_",)),
    "triage_reason": (_words(TriageReason), ("TRIAGE_REASON_",)),
    "verdict": (_words(AutotriageVerdict, "no_verdict"), ("VERDICT_",)),
    "validation_state": (_words(ValidationState), ("VALIDATION_STATE_",)),
    "reachability": (_words(Reachability, "no_reachability_analysis"), ("REACHABILITY_", "EXPOSURE_")),
}

#: Spellings of one meaning in the two dialects: the real reachability "no reachability analysis" is the
#: reference's (and the exposures filter's) "unknown"; a secret's VERDICT_NO_VERDICT is no verdict at all.
SYNONYMS: dict[str, dict[str, str | None]] = {
    "reachability": {"no_reachability_analysis": "unknown"},
    "verdict": {"no_verdict": None},
    # the reference's selection-filter words for a secret's validation state
    "validation_state": {
        "valid": ValidationState.CONFIRMED_VALID.value,
        "invalid": ValidationState.CONFIRMED_INVALID.value,
    },
}

#: kind -> {value as received: canonical value}, filled as values are met (the row path reads it inline).
KNOWN: dict[str, dict[str, str]] = {kind: {} for kind in VOCABULARIES}
_unknown_logged: set[tuple[str, str]] = set()


def _spelled(kind: str, value: str) -> str:
    """``value`` in the canonical spelling: proto prefix dropped, lowercase, spaces and dashes as underscores."""
    _, prefixes = VOCABULARIES[kind]
    text = value.strip()
    for prefix in prefixes:
        if text.upper().startswith(prefix):
            text = text[len(prefix):]
            break
    return text.lower().replace(" ", "_").replace("-", "_")


def enum_value(kind: str, value: Any) -> Any:
    """The canonical spelling of an enum value of ``kind``; an unknown one is returned as received, logged once.

    ``None`` and ``""`` (unset) stay as they are; a non-string is returned as is (the row path stores its JSON).
    """
    if value.__class__ is not str or not value:
        return value
    known = KNOWN[kind].get(value)
    if known is not None:
        return known
    spelled = _spelled(kind, value)
    synonyms = SYNONYMS.get(kind, {})
    if spelled in synonyms:
        return synonyms[spelled]
    if spelled in VOCABULARIES[kind][0]:
        KNOWN[kind][value] = spelled
        return spelled
    key = (kind, value)
    if key not in _unknown_logged:
        _unknown_logged.add(key)
        log.warning("unknown %s value %r: stored as received", kind, value)
    return value


def canonical_enum(kind: str, value: Any) -> Any:
    """For configuration: the canonical spelling when it is known, else ``value`` unchanged (validation decides)."""
    if not isinstance(value, str) or not value:
        return value
    spelled = _spelled(kind, value)
    synonyms = SYNONYMS.get(kind, {})
    if spelled in synonyms and synonyms[spelled] is not None:
        return synonyms[spelled]
    return spelled if spelled in VOCABULARIES[kind][0] else value


def forget_logged_unknowns() -> None:
    """Start a new run: unknown enum values are logged again, once each."""
    _unknown_logged.clear()


def as_int(value: object) -> int | None:
    """An integer id from an integer or a digit string (the real dialect's int64); anything else is None."""
    if value.__class__ is int:
        return value
    if isinstance(value, str):
        digits = value.strip()
        if digits.isdigit() or (digits[:1] == "-" and digits[1:].isdigit()):
            return int(digits)
    elif isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    return None


def file_path(value: str | None) -> str | None:
    """The file of a location: the real secrets' ``findingPath`` is ``file:line``, the reference's ``path`` and a
    code finding's ``filePath`` are the file alone (the line stays in ``raw``)."""
    if value is None:
        return None
    head, colon, line = value.rpartition(":")
    return head if colon and head and line.isdigit() else value


# --- the table ---------------------------------------------------------------------------------------------------

Path = tuple[str, ...]

#: canonical field -> (kind, source paths in order of precedence); also, in this order, the API-read columns of the
#: warehouse's ``findings`` (``warehouse.rows.FINDING_COLUMNS``) and the canonical attributes of ``models.Finding``.
#: Kinds: ``text``, ``id``, ``timestamp``, ``file_path`` (text, see ``file_path``) or an enum kind of
#: ``VOCABULARIES``. The first path with a value other than None and "" wins ("" if only that).
FINDING_FIELDS: dict[str, tuple[str, tuple[Path, ...]]] = {
    "id": ("id", (("id",),)),
    "repository_name": ("text", (("repository", "name"), ("repository",), ("repository_name",))),
    "ref": ("text", (("ref",),)),
    "rule_name": ("text", (("rule_name",), ("rule", "name"), ("secret_type",), ("type",))),
    "severity": ("severity", (("severity",),)),
    "confidence": ("confidence", (("confidence",),)),
    "status": ("status", (("status",),)),
    "triage_state": ("triage_state", (("triage_state",), ("triageState",))),
    "triage_reason": ("triage_reason", (("triage_reason",), ("triageReason",))),
    "autotriage_verdict": ("verdict", (("assistant", "autotriage", "verdict"), ("autotriage", "verdict"))),
    "reachability": ("reachability", (("reachability",),)),
    "match_based_id": ("text", (("match_based_id",),)),
    "relevant_since": ("timestamp", (("relevant_since",), ("created_at",), ("createdAt",))),
    "external_ticket_id": (
        "id",
        (
            ("external_ticket", "id"),
            ("externalTicket", "id"),
            ("usage", "external_ticket", "id"),
            ("usage", "externalTicket", "id"),
        ),
    ),
    "first_seen_scan_id": ("id", (("first_seen_scan_id",),)),
    "validation_state": ("validation_state", (("validation_state",), ("validationState",))),
    "path": (
        "file_path",
        (
            ("location", "filePath"),
            ("location", "file_path"),
            ("findingPath",),
            ("path",),
            # supply chain: where the vulnerable dependency is used (the real service sends ``path``)
            ("usage", "location", "filePath"),
            ("usage", "location", "file_path"),
            ("usage", "location", "path"),
        ),
    ),
    "triaged_at": ("timestamp", (("triaged_at",), ("triagedAt",))),
    "state_updated_at": ("timestamp", (("state_updated_at",), ("stateUpdatedAt",))),
}

# Any JSON value but an object: lets a field declared as an object arrive as something else without failing.
_NotObject = str | int | float | bool | list[Any] | None


def _struct_for(name: str, paths: list[Path]) -> type[msgspec.Struct]:
    """A partial, lenient struct holding exactly the keys of ``paths`` (objects where a path goes deeper)."""
    children: dict[str, list[Path]] = {}
    for path in paths:
        children.setdefault(path[0], [])
        if len(path) > 1:
            children[path[0]].append(path[1:])
    fields: list[tuple[str, Any, Any]] = []
    for key, rest in children.items():
        if rest:
            sub = _struct_for(f"{name}_{key}", rest)
            fields.append((key, sub | _NotObject, None))
        else:
            fields.append((key, object, None))
    return msgspec.defstruct(name, fields, forbid_unknown_fields=False)


_Struct = msgspec.Struct


def compile_reader(
    name: str, columns: tuple[str, ...], converters: dict[str, Callable[[Any], Any]]
) -> tuple[type[msgspec.Struct], Callable[..., tuple[Any, ...]]]:
    """The partial struct holding the source keys of ``columns``, and ``name(prefix, finding, suffix) -> (prefix,
    *values of columns, suffix)`` reading such a struct, both from ``FINDING_FIELDS``.

    The fast path of the warehouse: only the keys its columns need are decoded, and the table's source paths and
    precedence are written out as straight-line code (a generic loop over the table cost twice the time of
    building a row). ``converters``: kind -> function turning a source value into the column's value; enum
    kinds are normalised by ``enum_value`` first.
    """
    every_path = [p for column in columns for p in FINDING_FIELDS[column][1]]
    struct = _struct_for(f"{name}_Finding", every_path)
    env: dict[str, Any] = {"_Struct": _Struct, "enum_value": enum_value}
    lines = [f"def {name}(prefix, f, suffix):"]
    outs = []
    for index, column in enumerate(columns):
        kind, paths = FINDING_FIELDS[column]
        names_only = {p for p in paths if any(q[: len(p)] == p and q != p for q in paths)}
        var = f"v{index}"
        for number, path in enumerate(paths):
            expr = "f"
            guards = []
            for depth, key in enumerate(path):
                expr = f"{expr}.{key}"
                if depth < len(path) - 1:
                    guards.append(f"isinstance({expr}, _Struct)")
            value = expr if not guards else f"({expr} if {' and '.join(guards)} else None)"
            if path in names_only:
                value = f"({value} if {value}.__class__ is str else None)"
            elif any(len(q) > len(path) and q[: len(path)] == path for q in every_path):
                value = f"(None if isinstance({value}, _Struct) else {value})"
            if number == 0:
                lines.append(f"    {var} = {value}")
            else:
                lines.append(f"    if {var} is None or {var} == '':")
                lines.append(f"        w = {value}")
                lines.append(f"        if w is not None and ({var} is None or w != ''):")
                lines.append(f"            {var} = w")
        if kind in VOCABULARIES:
            env[f"k_{index}"] = KNOWN[kind]
            env[f"c_{index}"] = converters.get(kind, converters["text"])
            outs.append(f"c_{index}(k_{index}.get({var}) or enum_value({kind!r}, {var}) if {var}.__class__ is str "
                        f"else {var})")
        elif kind == "file_path":
            env[f"c_{index}"] = converters["text"]
            env["file_path"] = file_path
            outs.append(f"(file_path({var}) if {var}.__class__ is str or {var} is None else c_{index}({var}))")
        else:
            env[f"c_{index}"] = converters[kind]
            if kind == "text":
                outs.append(f"({var} if {var}.__class__ is str or {var} is None else c_{index}({var}))")
            elif kind == "id":
                outs.append(f"({var} if {var}.__class__ is int else c_{index}({var}))")
            else:
                outs.append(f"(None if {var} is None else c_{index}({var}))")
    lines.append("    return (prefix, " + ", ".join(outs) + ", suffix)")
    exec(compile("\n".join(lines), f"<canonical {name}>", "exec"), env)  # noqa: S102  # code from the table only
    return struct, env[name]


def _same(value: Any) -> Any:
    return value


#: The partial struct of a finding holding every source key of ``FINDING_FIELDS``, and its reader.
RawFinding, _read_sources = compile_reader(
    "_read_sources", tuple(FINDING_FIELDS), {"id": as_int, "text": _same, "timestamp": _same}
)
decode_finding: Callable[[bytes], Any] = msgspec.json.Decoder(RawFinding).decode


def source_values(finding: Any) -> dict[str, Any]:
    """The canonical fields of a finding (a ``RawFinding`` or a parsed JSON object), by ``FINDING_FIELDS``: enums
    and ids normalised; timestamps and texts as received (each consumer parses timestamps to its own type with the
    same parser: the typed model to a datetime, the warehouse to its UTC text)."""
    if not isinstance(finding, _Struct):
        try:
            finding = msgspec.convert(finding, RawFinding, from_attributes=True)
        except msgspec.ValidationError:  # not JSON-shaped (built in Python with other objects): read as it is
            finding = RawFinding(id=finding.get("id")) if isinstance(finding, dict) else RawFinding()
    return dict(zip(FINDING_FIELDS, _read_sources(None, finding, None)[1:-1], strict=True))
