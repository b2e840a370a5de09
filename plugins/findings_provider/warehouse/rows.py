"""API JSON objects -> warehouse row tuples, fast.

Each object is decoded once with a partial, lenient ``msgspec.Struct``: only the fields a column needs,
unknown fields ignored, every field optional, and leaf fields typed ``object`` so that no unexpected type or
null fails a page (the API is experimental and its secrets findings are undocumented). The ``raw`` column is
the object's original JSON text, never re-encoded when the bytes are at hand.

Value rules, the same for every table:

- text columns take strings as they are; any other JSON value is stored as its JSON text (``5``, ``true``,
  ``["MIT", "BSD"]``);
- integer columns take integers or digit strings, anything else is NULL;
- timestamps are normalised to the canonical UTC text of :mod:`.timestamps`; what does not parse is NULL
  (the original stays in ``raw``).

Findings carry values that no column of either database can hold. They are checked while the rows are built,
cheaply: an integer comparison per integer column and a search for NUL in the short text values, about 0.5 µs a
finding, 6% of building its row (searching the 2 KB of ``raw`` for ``\\u0000`` cost 1.3 µs). Only a page with a
problem takes the slower path that fixes its rows:

- an integer beyond the 64-bit range of a ``BIGINT`` column (SQLite's ``INTEGER`` has the same range);
- a NUL character in text (PostgreSQL's ``text`` cannot hold one; it is nulled on SQLite too, so both hold the
  same rows). JSON can carry one only as the escape ``\\u0000``;
- an item that is not valid UTF-8 (JSON text must be).

Such a value in a non-key column is stored as NULL (the original stays in ``raw``), like any value of the wrong
type. A finding whose key (``id``) is unusable is not stored. Either way a :class:`Rejection` names the id, the
column and the reason. ``raw`` is ``text`` on both databases, never ``jsonb``, so the six characters of a
``\\u0000`` escape are stored in it as received (a query that casts ``raw`` to ``jsonb`` on PostgreSQL must
expect that cast to fail for such a finding).

Rows are tuples in the order of the module's ``*_COLUMNS`` constants; ``synced_at`` (and a finding's ``digest``,
:func:`content_digest` of its ``raw``) is added by the store.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import msgspec
import orjson

from findings_provider.client.canonical import FINDING_FIELDS, ISSUE_TYPES, compile_reader
from findings_provider.client.dependency_identity import dependency_key, licence_list

from .timestamps import utc_text

T = TypeVar("T")
S = TypeVar("S", bound=msgspec.Struct)
Row = tuple[Any, ...]
#: A JSON object as received (raw bytes or text) or parsed.
JsonObject = msgspec.Raw | bytes | str | Mapping[str, Any]

#: The range of a ``BIGINT`` column (and of SQLite's ``INTEGER``).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: A finding's row: its key, the API-read fields of ``client.canonical.FINDING_FIELDS`` (in that order), ``raw``.
FINDING_COLUMNS = ("issue_type", *FINDING_FIELDS, "raw")
SCAN_COLUMNS = (
    "id",
    "repository_id",
    "branch",
    "commit",
    "status",
    "exit_code",
    "started_at",
    "completed_at",
    "is_full_scan",
    "raw",
)
POLICY_RULE_COLUMNS = (
    "policy_id",
    "id",
    "path",
    "policy_mode",
    "severity",
    "category",
    "confidence",
    "source",
    "raw",
)
DEPENDENCY_COLUMNS = (
    "id",
    "name",
    "version",
    "ecosystem",
    "license",
    "lockfile_path",
    "repository_id",
    "raw",
)
DEPENDENCY_REPOSITORY_COLUMNS = ("id", "name", "num_dependencies", "has_dependency_path_scan", "raw")

_ID = FINDING_COLUMNS.index("id")
_RELEVANT_SINCE = FINDING_COLUMNS.index("relevant_since")
#: Integer columns of a finding row besides its key, and its text columns that decoded strings can reach.
_FINDING_INTS = tuple(FINDING_COLUMNS.index(c) for c in ("external_ticket_id", "first_seen_scan_id"))
_FINDING_TEXTS = tuple(
    i for i, c in enumerate(FINDING_COLUMNS) if c not in ("issue_type", "id", "raw") and i not in _FINDING_INTS
)
OUT_OF_RANGE = "integer beyond the 64-bit range of the column"
NUL_CHARACTER = "NUL character, which PostgreSQL text cannot hold"
NO_ID = "no usable id (not an integer or a digit string)"
NOT_UTF8 = "not valid UTF-8 JSON"


@dataclass(frozen=True)
class Rejection:
    """A value of a finding that the warehouse cannot hold: the finding was skipped, or stored with it NULL."""

    issue_type: str
    #: The finding's id as received: an int within 64 bits, else its text (None when it has none).
    id: int | str | None
    field: str
    reason: str
    skipped: bool

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (for an XCom)."""
        action = "finding skipped" if self.skipped else "stored as NULL"
        return {"id": self.id, "field": self.field, "reason": self.reason, "action": action}


class _Lenient(msgspec.Struct, forbid_unknown_fields=False):
    """Base of the partial structs: unknown fields are ignored."""


class _Scan(_Lenient):
    id: object = None
    repository_id: object = None
    branch: object = None
    commit: object = None
    status: object = None
    exit_code: object = None
    started_at: object = None
    completed_at: object = None
    is_full_scan: object = None


class _Rule(_Lenient):
    id: object = None
    path: object = None
    policyMode: object = None
    severity: object = None
    category: object = None
    confidence: object = None
    source: object = None


# Any JSON value but an object: lets a field declared as an object arrive as something else without failing.
_NotAnObject = str | int | float | bool | list[Any] | None


class _Package(_Lenient):
    name: object = None
    versionSpecifier: object = None


class _CodeLocation(_Lenient):
    path: object = None


class _Dependency(_Lenient):
    id: object = None
    name: object = None
    version: object = None
    package: _Package | _NotAnObject = None
    definedAt: _CodeLocation | _NotAnObject = None
    ecosystem: object = None
    license: object = None
    licenses: object = None
    lockfilePath: object = None
    lockfile_path: object = None
    repositoryId: object = None
    repository_id: object = None


class _RepositorySummary(_Lenient):
    id: object = None
    name: object = None
    numDependencies: object = None
    hasDependencyPathScan: object = None


_decode_scan = msgspec.json.Decoder(_Scan).decode
_decode_rule = msgspec.json.Decoder(_Rule).decode
_decode_dependency = msgspec.json.Decoder(_Dependency).decode
_decode_repository = msgspec.json.Decoder(_RepositorySummary).decode


def content_digest(raw: str) -> int:
    """The digest of a finding's ``raw`` JSON text, stored beside it (``findings.digest``): the 64-bit BLAKE2b of its
    UTF-8 bytes (the bytes the page gave), as a signed integer (a ``BIGINT``).

    The upsert compares it, not the 2-3 KB text, to tell an unchanged finding from a changed one. Two different
    texts share a digest with probability 2**-64 (such a change would be stored with the finding's next change).
    """
    return _bytes_digest(raw.encode())


def _bytes_digest(data: bytes) -> int:
    """:func:`content_digest` of a finding's UTF-8 bytes (its item as the page gave it)."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big", signed=True)


def finding_digests(rows: Iterable[Row]) -> list[int]:
    """The :func:`content_digest` of each ``FINDING_COLUMNS`` row, in order."""
    raw = FINDING_COLUMNS.index("raw")
    return [content_digest(row[raw]) for row in rows]


def _text(value: object) -> str | None:
    if value is None or isinstance(value, str):
        return value
    return orjson.dumps(value).decode()


def _licences(value: object) -> str | None:
    """Licences in their stable joined form: one licence, or several (a list, in the order sent) joined with ``, ``;
    NULL for none. The inventory report splits the column on ``,`` again (one count per licence)."""
    if isinstance(value, (list, str)) or value is None:
        return ", ".join(licence_list(value)) or None
    return _text(value)


def _int(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        digits = value.strip()
        if digits.isdigit() or (digits[:1] == "-" and digits[1:].isdigit()):
            return int(digits)
    return None


def _bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return value == 1
    return None


def _required(value: T | None, what: str, raw: str) -> T:
    if value is None:
        raise ValueError(f"{what} has no usable id: {raw[:200]}")
    return value


def _issue_type(issue_type: str) -> str:
    """Return the canonical issue type string (also for a ``str`` enum member)."""
    if issue_type not in ISSUE_TYPES:
        raise ValueError(f"unknown issue type {issue_type!r}; expected one of {', '.join(ISSUE_TYPES)}")
    return ISSUE_TYPES[ISSUE_TYPES.index(issue_type)]


# A finding (code, supply chain, AI, secret) is read through the client's canonical table: the same source keys
# and normalisers as the typed models (``client.canonical``), so the two paths cannot disagree. Only the keys of
# the columns are decoded; ``_finding_row`` builds a row (``issue_type`` first, ``raw`` last) in straight-line
# code. Enum values are normalised, then stored like any text.
_RowFinding, _finding_row = compile_reader(
    "_finding_row", FINDING_COLUMNS[1:-1], {"id": _int, "text": _text, "timestamp": utc_text}
)
# the struct's fields are the columns' source keys, built at import: attribute access is not checked statically
_decode_finding: Callable[[bytes], Any] = msgspec.json.Decoder(_RowFinding).decode


def _needs_check(row: Row) -> bool:
    """Whether ``row`` holds a value the warehouse cannot (cheap: integer bounds, a NUL search in short texts)."""
    ident = row[_ID]
    if ident is None or not INT64_MIN <= ident <= INT64_MAX:
        return True
    for index in _FINDING_INTS:
        value = row[index]
        if value is not None and not INT64_MIN <= value <= INT64_MAX:
            return True
    for index in _FINDING_TEXTS:
        value = row[index]
        if value is not None and "\x00" in value:
            return True
    return False


def _reported_id(ident: object) -> int | str | None:
    return ident if ident is None or (isinstance(ident, int) and INT64_MIN <= ident <= INT64_MAX) else str(ident)


def _holdable(row: Row, rejected: list[Rejection] | None) -> Row | None:
    """``row`` with the values the warehouse cannot hold set to NULL; None when its key is unusable.

    Each problem is appended to ``rejected``; without that list an unusable key raises ValueError.
    """
    issue_type, ident, raw = row[0], row[_ID], row[-1]
    if ident is None or not INT64_MIN <= ident <= INT64_MAX:
        reason = NO_ID if ident is None else OUT_OF_RANGE
        if rejected is None:
            raise ValueError(f"{issue_type} finding has {reason}: {raw[:200]}")
        rejected.append(Rejection(issue_type, _reported_id(ident), "id", reason, skipped=True))
        return None
    values = list(row)
    for index in _FINDING_INTS:
        value = values[index]
        if value is not None and not INT64_MIN <= value <= INT64_MAX:
            values[index] = None
            if rejected is not None:
                rejected.append(Rejection(issue_type, ident, FINDING_COLUMNS[index], OUT_OF_RANGE, skipped=False))
    for index in _FINDING_TEXTS:
        value = values[index]
        if value is not None and "\x00" in value:
            values[index] = None
            if rejected is not None:
                rejected.append(Rejection(issue_type, ident, FINDING_COLUMNS[index], NUL_CHARACTER, skipped=False))
    return tuple(values)


def _undecodable(
    issue_type: str, item: msgspec.Raw | bytes, error: Exception, rejected: list[Rejection] | None
) -> None:
    """Report a finding that is not valid UTF-8 JSON (with its id, when a lenient decoding finds one)."""
    if rejected is None:
        raise ValueError(f"{issue_type} finding is {NOT_UTF8} ({error}): {bytes(item)[:200]!r}")
    try:
        ident = _int(_decode_finding(bytes(item).decode("utf-8", "replace").encode()).id)
    except (msgspec.DecodeError, ValueError):
        ident = None
    rejected.append(Rejection(issue_type, _reported_id(ident), "raw", NOT_UTF8, skipped=True))


def finding_rows(
    issue_type: str, items: Sequence[msgspec.Raw | bytes], rejected: list[Rejection] | None = None
) -> list[Row]:
    """Build ``FINDING_COLUMNS`` tuples from findings given as the raw bytes sliced out of a page.

    ``raw`` is the item's bytes decoded as UTF-8, byte for byte. Every other column is the canonical value of
    ``client.canonical.FINDING_FIELDS`` (either dialect: source keys in order of precedence, enums in their
    canonical spelling, digit-string ids as integers, timestamps as canonical UTC text); see docs/canonical.md.

    Values the warehouse cannot hold (see the module's docstring) are set to NULL, and findings whose id is
    unusable or that are not valid UTF-8 are left out; each case is appended to ``rejected``. Without that
    list, such a finding raises ValueError. An unknown issue type always does.
    """
    kind = _issue_type(issue_type)
    decode = _decode_finding
    try:  # the fast path: a comprehension, then one cheap check of each row
        rows = [_finding_row(kind, decode(item), str(item, "utf-8")) for item in items]
    except (msgspec.DecodeError, UnicodeDecodeError):
        rows = _decodable_rows(kind, items, rejected)
    if any(map(_needs_check, rows)):
        holdable = (_holdable(row, rejected) if _needs_check(row) else row for row in rows)
        rows = [row for row in holdable if row is not None]
    return rows


def _decodable_rows(
    issue_type: str, items: Sequence[msgspec.Raw | bytes], rejected: list[Rejection] | None
) -> list[Row]:
    """The rows of the items that decode; the others are reported (or raise, without ``rejected``)."""
    rows = []
    for item in items:
        try:
            raw = str(item, "utf-8")
            finding = _decode_finding(item)
        except (msgspec.DecodeError, UnicodeDecodeError) as error:
            _undecodable(issue_type, item, error, rejected)
            continue
        rows.append(_finding_row(issue_type, finding, raw))
    return rows


# The key columns of a finding read by the screen (:func:`screened_findings`): its id and ``relevant_since``, which
# the extraction needs of every finding, and the integer columns whose range the warehouse checks.
_KEY_COLUMNS = ("id", "relevant_since", *(FINDING_COLUMNS[i] for i in _FINDING_INTS))
_KeyFinding, _key_row = compile_reader("_key_row", _KEY_COLUMNS, {"id": _int, "text": _text, "timestamp": utc_text})
_decode_key: Callable[[bytes], Any] = msgspec.json.Decoder(_KeyFinding).decode
#: What a NUL character looks like in JSON text (the only way it can be there): a finding holding it is built.
_NUL_ESCAPE = re.compile(rb"\\u0000").search


@dataclass
class ScreenedFindings:
    """A page's findings screened without building their rows (:func:`screened_findings`): for each finding kept,
    its canonical id and ``relevant_since`` and its digest, in page order; :meth:`rows` builds the rows of those
    that are to be written.

    A finding that holds, or may hold, a value the warehouse cannot (see the module's docstring) has its row built
    by the screen already (``built``, by position), so its rejected values are reported as the full path reports
    them; a finding whose id is unusable is not kept (a :class:`Rejection` says so).
    """

    issue_type: str
    ids: list[int]
    dates: list[str | None]
    digests: list[int]
    items: list[msgspec.Raw | bytes]
    built: dict[int, Row]

    def rows(self, positions: Iterable[int]) -> list[Row]:
        """The ``FINDING_COLUMNS`` rows of the findings at ``positions``: those built already, the others built now
        (they hold no value the warehouse cannot: the screen checked)."""
        positions = list(positions)
        later = [at for at in positions if at not in self.built]
        made = dict(zip(later, finding_rows(self.issue_type, [self.items[at] for at in later]), strict=True))
        return [self.built[at] if at in self.built else made[at] for at in positions]


def screened_findings(
    issue_type: str, items: Sequence[msgspec.Raw | bytes], rejected: list[Rejection]
) -> ScreenedFindings:
    """A page's findings as :class:`ScreenedFindings`: what deciding which findings to write needs, at about two
    thirds of the CPU of :func:`finding_rows` with the digests (``bench/phases.py``), whose work goes mostly to
    findings that have not changed.

    Each item is decoded for its key columns only (``_KEY_COLUMNS``); its digest is hashed from its bytes (the
    same as :func:`content_digest` of the row's ``raw``). An item that is not ASCII and not UTF-8, that holds a
    ``\\u0000`` escape, that does not decode, whose id is unusable or whose integer columns are out of range,
    has its row built at once by :func:`finding_rows` (reporting to ``rejected``), so the findings kept and the
    values rejected are those of the full path.
    """
    kind = _issue_type(issue_type)
    # the page as a whole first: most pass, and then each item does (a JSON value begins and ends with an ASCII
    # character, so no UTF-8 sequence spans two items)
    if _clean(b"".join(items)):
        try:
            keys = [_key_row(None, _decode_key(item), None) for item in items]
        except msgspec.DecodeError:
            keys = None
        if keys is not None and _holdable_keys(keys):
            return ScreenedFindings(kind, [key[1] for key in keys], [key[2] for key in keys],
                                    [_bytes_digest(item) for item in items], list(items), {})
    ids: list[int] = []
    dates: list[str | None] = []
    digests: list[int] = []
    kept: list[msgspec.Raw | bytes] = []
    built: dict[int, Row] = {}
    for item in items:
        key = _screened_key(item)
        if key is None:
            made = finding_rows(kind, [item], rejected)
            if not made:  # skipped (reported)
                continue
            built[len(ids)] = row = made[0]
            key = (row[_ID], row[_RELEVANT_SINCE])
        ids.append(key[0])
        dates.append(key[1])
        digests.append(_bytes_digest(item))
        kept.append(item)
    return ScreenedFindings(kind, ids, dates, digests, kept, built)


def _clean(text: bytes) -> bool:
    """Whether JSON text is valid UTF-8 and holds no NUL escape (ASCII, the usual case, is checked in C first)."""
    return (text.isascii() or _utf8(text)) and _NUL_ESCAPE(text) is None


def _holdable_keys(keys: list[Row]) -> bool:
    """Whether the ``_key_row`` tuples hold usable ids and integers within 64 bits (their min and max, in C)."""
    ids = [key[1] for key in keys]
    integers = [value for key in keys for value in key[3:-1] if value is not None]
    return _in_range(ids) and (not integers or _in_range(integers))


def _in_range(values: list[Any]) -> bool:
    """Whether ``values`` are integers in the 64-bit range, None not among them."""
    return bool(values) and None not in values and INT64_MIN <= min(values) and max(values) <= INT64_MAX


def _screened_key(item: msgspec.Raw | bytes) -> tuple[int, str | None] | None:
    """A finding's canonical id and ``relevant_since``; None when its row must be built to tell what it holds."""
    data = bytes(item)
    if not _clean(data):
        return None
    try:
        key = _key_row(None, _decode_key(data), None)
    except msgspec.DecodeError:
        return None
    return (key[1], key[2]) if _holdable_keys([key]) else None


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def finding_row_from_dict(issue_type: str, finding: Mapping[str, Any]) -> Row:
    """Build one ``FINDING_COLUMNS`` tuple from a parsed finding (``raw`` is its orjson encoding).

    Values the warehouse cannot hold are NULL; an unusable id raises ValueError.
    """
    data = orjson.dumps(finding)
    raw = data.decode()
    row = _finding_row(_issue_type(issue_type), _decode_finding(data), raw)
    if _needs_check(row):
        row = _holdable(row, None)  # type: ignore[assignment]  # never None: raises instead
    return row


def _decoded(items: Iterable[JsonObject], decode: Callable[[bytes], S]) -> Iterator[tuple[S, str]]:
    """Decode each object with ``decode``; yield it with its JSON text (as received, or orjson's encoding)."""
    for item in items:
        if isinstance(item, (bytes, msgspec.Raw)):
            data = bytes(item)
        elif isinstance(item, str):
            data = item.encode()
        else:
            data = orjson.dumps(item)
        yield decode(data), data.decode()


def scan_rows(items: Iterable[JsonObject]) -> list[Row]:
    """Build ``SCAN_COLUMNS`` tuples from scan search results (reference 2.5), raw bytes or parsed."""
    return [
        (
            _required(_text(scan.id), "scan", raw),
            _text(scan.repository_id),
            _text(scan.branch),
            _text(scan.commit),
            _text(scan.status),
            _int(scan.exit_code),
            utc_text(scan.started_at),
            utc_text(scan.completed_at),
            _bool(scan.is_full_scan),
            raw,
        )
        for scan, raw in _decoded(items, _decode_scan)
    ]


def policy_rule_rows(policy_id: str, items: Iterable[JsonObject]) -> list[Row]:
    """Build ``POLICY_RULE_COLUMNS`` tuples from the rules of one policy (reference 2.8)."""
    return [
        (
            str(policy_id),
            _required(_text(rule.id), "rule", raw),
            _text(rule.path),
            _text(rule.policyMode),
            _text(rule.severity),
            _text(rule.category),
            _text(rule.confidence),
            _text(rule.source),
            raw,
        )
        for rule, raw in _decoded(items, _decode_rule)
    ]


def _dependency_row(dep: _Dependency, raw: str) -> Row:
    package = dep.package
    name = dep.name
    version = dep.version
    if isinstance(package, _Package):
        name = package.name if name is None else name
        version = package.versionSpecifier if version is None else version
    elif isinstance(package, str) and name is None:
        name = package
    lockfile = dep.lockfilePath or dep.lockfile_path
    if lockfile is None and isinstance(dep.definedAt, _CodeLocation):
        lockfile = dep.definedAt.path
    repository_id = _text(dep.repositoryId if dep.repositoryId is not None else dep.repository_id)
    ident = _text(dep.id)
    if ident is None:
        ident = dependency_key(repository_id, lockfile, dep.ecosystem, name, version)
    return (
        _required(ident, "dependency", raw),
        _text(name),
        _text(version),
        _text(dep.ecosystem),
        _licences(dep.license if dep.license is not None else dep.licenses),
        _text(lockfile),
        repository_id,
        raw,
    )


def dependency_rows(items: Iterable[JsonObject]) -> list[Row]:
    """Build ``DEPENDENCY_COLUMNS`` tuples from dependencies in either dialect (camelCase or snake_case keys).

    The reference's shape carries ``id``, ``name``, ``version``. The real service's carries no id and no top-level
    name or version: ``repositoryId``, ``package {name, versionSpecifier}``, ``ecosystem``, ``licenses`` and the
    lockfile as ``definedAt.path``. Without an ``id`` the row's ``id`` is the canonical key of
    :mod:`findings_provider.client.dependency_identity` (``{repository id}|{lockfile path}|{ecosystem}|{name}|
    {version}``); a dependency with neither an id nor a repository id and package name raises ValueError.
    ``license`` holds the licences joined with ``, `` (see ``_licences``).
    """
    return [_dependency_row(dep, raw) for dep, raw in _decoded(items, _decode_dependency)]


def dependency_repository_rows(items: Iterable[JsonObject]) -> list[Row]:
    """Build ``DEPENDENCY_REPOSITORY_COLUMNS`` tuples from repository summaries (reference 2.4)."""
    return [
        (
            _required(_int(repo.id), "repository summary", raw),
            _text(repo.name),
            _int(repo.numDependencies),
            _bool(repo.hasDependencyPathScan),
            raw,
        )
        for repo, raw in _decoded(items, _decode_repository)
    ]
