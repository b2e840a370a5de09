"""Fast, deterministic generation of code, supply-chain and secrets findings.

Findings come in fixed-size chunks, each with its own seeded random source, so the same seed gives the same
ids and content whatever the chunk order. Parts shared by many findings (rule, repository, assistant texts)
are serialised once as ``orjson.Fragment`` so serialising a finding costs little more than its own fields.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

import orjson

from .. import timefmt
from ..dialect import REAL, assistant_to_real, finding_to_real, rule_to_real
from ..dialect import usage_location as real_usage_location
from ..rows import AI_SAST_ID_BASE, SAST_ID_BASE, SCA_ID_BASE, SECRETS_ID_BASE, STATE_OF_STATUS, FindingRow, multi
from . import vocabulary as vocab
from .world import DAY, Advisory, CodeRule, Repository, World

Batch = tuple[list[FindingRow], list[tuple[int, bytes]]]
T = TypeVar("T")


class Draw(random.Random):
    """A seeded random source whose draws cost one ``random()`` call each (``choice`` and ``randint`` loop
    over ``getrandbits``): generating a million findings makes tens of millions of draws."""

    def pick(self, items: Sequence[T]) -> T:
        """One item, uniformly."""
        return items[int(self.random() * len(items))]

    def between(self, low: int, high: int) -> int:
        """An integer in ``[low, high]``, uniformly."""
        return low + int(self.random() * (high - low + 1))

    def weighted(self, items: Sequence[T], cumulative: Sequence[float]) -> T:
        """One item, with probabilities given by cumulative weights (see :func:`cumulate`)."""
        return items[bisect.bisect(cumulative, self.random() * cumulative[-1])]


def cumulate(weights: Sequence[float]) -> tuple[float, ...]:
    """Cumulative weights for :meth:`Draw.weighted`."""
    return tuple(itertools.accumulate(weights))


CHUNK = 5000
WINDOW_DAYS = 60.0
STATUSES = ("open", "fixed", "ignored", "reviewing", "fixing")
STATUS_WEIGHTS = cumulate((70, 12, 8, 5, 5))
TRIAGE_REASONS = ("acceptable_risk", "false_positive", "no_time", "no_triage_reason")
REACHABILITY = ("reachable", "always_reachable", "conditionally_reachable", "unreachable", "unknown")
REACHABILITY_WEIGHTS = cumulate((15, 5, 10, 45, 25))
VERDICTS = (None, "true_positive", "false_positive")
VERDICT_WEIGHTS = cumulate((40, 30, 30))
TRANSITIVITIES = ("direct", "transitive", "unknown")
TRANSITIVITY_WEIGHTS = cumulate((35, 55, 10))
NOTES = ("Checked with the owning team.", "Covered by the WAF rule set.", "Tracked in the quarterly plan.",
         "Input is validated upstream.")


def _frag(value: Any) -> orjson.Fragment:
    return orjson.Fragment(orjson.dumps(value))


def _location(rng: Draw, path: str) -> dict[str, Any]:
    line = rng.between(1, 900)
    column = rng.between(1, 40)
    return {"filePath": path, "line": line, "column": column, "endLine": line + rng.between(0, 6),
            "endColumn": column + rng.between(5, 60)}


def _ticket(rng: Draw, first_id: int, ids: list[int]) -> dict[str, Any]:
    number = rng.between(100, 9999)
    return {"id": 900_000_000 + first_id, "externalSlug": f"{vocab.TICKET_PREFIX}-{number}",
            "url": f"{vocab.TRACKER_URL}/{vocab.TICKET_PREFIX}-{number}", "linkedIssueIds": ids}


class _Triage:
    """Status and triage fields shared by the findings of one fingerprint."""

    __slots__ = ("comment", "reason", "state", "status", "triage_state")

    def __init__(self, rng: Draw) -> None:
        self.status = rng.weighted(STATUSES, STATUS_WEIGHTS)
        self.state = STATE_OF_STATUS[self.status]
        self.reason: str | None = None
        self.comment: str | None = None
        self.triage_state = "untriaged"
        if self.status in ("ignored", "reviewing", "fixing"):
            self.triage_state = self.status
            if self.status == "ignored":
                self.reason = rng.pick(TRIAGE_REASONS)
        elif self.status == "open" and rng.random() < 0.04:
            self.triage_state = "reopened"
        if self.triage_state != "untriaged":
            self.comment = rng.pick(NOTES)


class FindingFactory:
    """Generates the findings of one world; create once, then call :meth:`batches` per issue type."""

    def __init__(self, world: World, seed: int, dialect: str = "reference") -> None:
        self.world = world
        self.real = dialect == REAL
        self.seed = seed
        self.now = world.now
        self.repos = world.repositories
        self.repo_frags = {r.id: _frag({"name": r.name, "url": r.url}) for r in self.repos}
        default_policy = world.policies[0]
        self.policy_frag = _frag({"id": int(default_policy.id), "name": default_policy.name,
                                  "slug": default_policy.slug})
        self.rules_by_language: dict[str, list[int]] = {}
        for index, rule in enumerate(world.rules):
            self.rules_by_language.setdefault(rule.spec.language, []).append(index)
        convert = rule_to_real if self.real else dict
        self.rule_frags = [_frag(convert(self._rule_object(rule))) for rule in world.rules]
        self.category_frags = [_frag([rule.spec.category]) for rule in world.rules]
        assistant = assistant_to_real if self.real else dict
        self.assistant_frags = [
            [[_frag(assistant(self._assistant(rule, verdict, component))) for component in vocab.COMPONENTS]
             for verdict in VERDICTS]
            for rule in world.rules
        ]
        self.ai_rules = [(f"ai.detection.{name}", _frag(convert({
            "category": "security", "confidence": "medium", "cweNames": [cwe], "message": impact,
            "name": f"ai.detection.{name}", "owaspNames": ["A01:2021 - Broken Access Control"],
            "subcategories": ["vuln"], "vulnerabilityClasses": [vulnerability_class]})), impact)
            for name, vulnerability_class, cwe, impact in vocab.AI_DETECTIONS]
        self.sca_rule_frags = [_frag(convert(self._sca_rule_object(a))) for a in world.advisories]
        self.scan_ids = {r.id: world.scan_ids_by_repo.get(r.id) or [0] for r in self.repos}

    @staticmethod
    def _rule_object(rule: CodeRule) -> dict[str, Any]:
        spec = rule.spec
        return {
            "category": spec.category,
            "confidence": spec.confidence,
            "cweNames": [spec.cwe] if spec.cwe else [],
            "message": spec.message,
            "name": rule.path,
            "owaspNames": [spec.owasp] if spec.owasp else [],
            "subcategories": ["vuln"] if spec.category == "security" else ["audit"],
            "vulnerabilityClasses": [spec.vulnerability_class],
        }

    @staticmethod
    def _assistant(rule: CodeRule, verdict: str | None, component: tuple[str, str]) -> dict[str, Any]:
        spec = rule.spec
        body: dict[str, Any] = {
            "autofix": {
                "explanation": f"Replaced the unsafe construct flagged by {rule.path.rsplit('.', 1)[-1]} with "
                               "the library's safe API and kept the surrounding behaviour unchanged.",
                "fix_code": "query = session.execute(text(\"SELECT * FROM invoices WHERE id = :id\"), "
                            "{\"id\": invoice_id})",
            },
            "component": {"risk": component[0], "tag": component[1]},
            "guidance": {
                "instructions": "1. Locate the flagged call.\n2. Pass user input as a bound parameter or "
                                "through the framework's escaping helper.\n3. Add a regression test that "
                                "sends a crafted value.",
                "summary": f"Fix the {spec.vulnerability_class.lower()} by using a safe API.",
            },
            "rule_explanation": {
                "explanation": spec.message,
                "summary": f"{spec.vulnerability_class} risk in {spec.technology} code.",
            },
        }
        if verdict is not None:
            body["autotriage"] = {"reason": vocab.AUTOTRIAGE_REASONS[verdict], "verdict": verdict}
        return body

    @staticmethod
    def _sca_rule_object(advisory: Advisory) -> dict[str, Any]:
        return {
            "category": "security",
            "confidence": "high",
            "cweNames": [advisory.cwe],
            "message": f"{advisory.summary}. Versions before {advisory.fix_version or 'an unreleased fix'} "
                       f"of {advisory.package} are affected; upgrade to a fixed version or remove the "
                       "dependency.",
            "name": advisory.rule_name,
            "owaspNames": ["A06:2021 - Vulnerable and Outdated Components"],
            "subcategories": ["vuln"],
            "vulnerabilityClasses": ["Vulnerable Dependency"],
        }

    def _members(self, rng: Draw, repo: Repository) -> list[str]:
        """Refs on which one fingerprint appears (about 15% of fingerprints span 2-3 refs)."""
        if len(repo.branches) > 1 and rng.random() < 0.15:
            extra = rng.sample(repo.branches[1:], min(len(repo.branches) - 1, rng.between(1, 2)))
            return [repo.primary_branch, *extra]
        return [repo.primary_branch if rng.random() < 0.75 else rng.pick(repo.branches)]

    def _times(self, rng: Draw) -> tuple[float, float]:
        """(created_at, relevant_since) epochs within the window, skewed towards recent ones; relevant_since is
        whole milliseconds, so clients filtering and ordering on any of its formats agree with the server."""
        relevant = timefmt.to_millis(self.now - (rng.random() ** 1.5) * WINDOW_DAYS * DAY)
        created = relevant - (rng.uniform(0, 90) * DAY if rng.random() < 0.2 else 0.0)
        return created, relevant

    def batches(self, issue_type: str, count: int) -> Iterator[Batch]:
        """Yield (rows, bodies) batches of ``count`` findings of ``issue_type``."""
        make = {"sast": self._sast_chunk, "sca": self._sca_chunk, "secrets": self._secrets_chunk,
                "ai_sast": self._ai_chunk}[issue_type]
        base = {"sast": SAST_ID_BASE, "sca": SCA_ID_BASE, "secrets": SECRETS_ID_BASE,
                "ai_sast": AI_SAST_ID_BASE}[issue_type]
        for chunk, start in enumerate(range(0, count, CHUNK)):
            yield make(Draw(f"{self.seed}:{issue_type}:{chunk}"), base + start, min(CHUNK, count - start))

    def _groups(self, rng: Draw, first_id: int, size: int) -> Iterator[tuple[Repository, list[str], list[int]]]:
        """Split ``size`` ids from ``first_id`` into fingerprint groups: (repository, refs, ids)."""
        next_id, end = first_id, first_id + size
        while next_id < end:
            repo = rng.pick(self.repos)
            refs = self._members(rng, repo)[: end - next_id]
            ids = list(range(next_id, next_id + len(refs)))
            next_id += len(refs)
            yield repo, refs, ids

    def _common(self, rng: Draw, fid: int, repo: Repository, ref: str, triage: _Triage,
                match_based_id: str, syntactic_id: str, location: dict[str, Any],
                ticket: dict[str, Any] | None) -> tuple[dict[str, Any], float]:
        created, relevant = self._times(rng)
        updated = relevant + rng.uniform(0, self.now - relevant)
        triaged_at = None if triage.comment is None else timefmt.render(updated, timefmt.SPACE_OFFSET)
        style = fid % 3
        return {
            "id": fid,
            "ref": ref,
            "repository": self.repo_frags[repo.id],
            "line_of_code_url": f"{repo.url}/blob/{repo.commits[ref]}/{location['filePath']}#L{location['line']}",
            "match_based_id": match_based_id,
            "syntactic_id": syntactic_id,
            "first_seen_scan_id": rng.pick(self.scan_ids[repo.id]),
            "created_at": timefmt.render(created, style),
            "relevant_since": timefmt.render(relevant, (style + 1) % 3),
            "state_updated_at": timefmt.render(updated, (style + 2) % 3),
            "state": triage.state,
            "status": triage.status,
            "triage_state": triage.triage_state,
            "triage_reason": triage.reason,
            "triage_comment": triage.comment,
            "triaged_at": triaged_at,
            "location": location,
            "external_ticket": ticket,
            "review_comments": [{"externalDiscussionId": f"{rng.getrandbits(40):010x}",
                                 "externalNoteId": rng.between(10000, 999999)}] if rng.random() < 0.1 else [],
        }, relevant

    def _ai_chunk(self, rng: Draw, first_id: int, size: int) -> Batch:
        """AI-detected findings: code findings with an ``ai.detection.*`` rule and ``ai_impact``."""
        return self._sast_chunk(rng, first_id, size, ai=True)

    def _sast_chunk(self, rng: Draw, first_id: int, size: int, ai: bool = False) -> Batch:
        rows: list[FindingRow] = []
        bodies: list[tuple[int, bytes]] = []
        dumps = orjson.dumps
        for repo, refs, ids in self._groups(rng, first_id, size):
            candidates = self.rules_by_language.get(repo.language) or range(len(self.world.rules))
            rule_index = rng.pick(candidates)
            ai_rule = rng.pick(self.ai_rules) if ai else None
            rule = self.world.rules[rule_index]
            spec = rule.spec
            triage = _Triage(rng)
            verdict_index = rng.weighted((0, 1, 2), VERDICT_WEIGHTS)
            component_index = rng.between(0, len(vocab.COMPONENTS) - 1)
            assistant = None if rng.random() < 0.1 else self.assistant_frags[rule_index][verdict_index][
                component_index]
            verdict = VERDICTS[verdict_index] if assistant is not None else None
            ticket = _ticket(rng, ids[0], ids) if rng.random() < 0.05 and triage.status != "fixed" else None
            match_based_id = f"{rng.getrandbits(128):032x}"
            syntactic_id = f"{rng.getrandbits(128):032x}"
            location = _location(rng, rng.pick(vocab.FILE_PATHS[spec.language]))
            ctf_state = rng.pick(("open", "merged")) if rng.random() < 0.08 else None
            ctf_prs = [] if ctf_state is None else [{
                "created_at": timefmt.render(self.now - rng.uniform(0, 20) * DAY, timefmt.MILLIS_Z),
                "url": f"{repo.url}/pull/{rng.between(100, 5000)}", "state": ctf_state}]
            ctf_failures = [] if rng.random() > 0.03 else [{
                "created_at": timefmt.render(self.now - rng.uniform(0, 20) * DAY, timefmt.MICROS_Z),
                "reason": "The autofix did not apply cleanly to the current branch."}]
            categories = multi([spec.category])
            pro = 1 if rule.source == "SOURCE_PRO" else 0
            rulesets = multi(rule.rulesets)
            component_tag = vocab.COMPONENTS[component_index][1] if assistant is not None else None
            mates = 1 if len(ids) > 1 else 0
            for fid, ref in zip(ids, refs, strict=True):
                body, relevant = self._common(rng, fid, repo, ref, triage, match_based_id, syntactic_id,
                                              location, ticket)
                body["severity"] = spec.severity
                body["confidence"] = spec.confidence
                body["categories"] = self.category_frags[rule_index]
                body["rule"] = self.rule_frags[rule_index] if ai_rule is None else ai_rule[1]
                body["rule_name"] = rule.path if ai_rule is None else ai_rule[0]
                body["rule_message"] = spec.message
                body["sourcing_policy"] = self.policy_frag
                body["click_to_fix_prs"] = ctf_prs
                body["click_to_fix_failures"] = ctf_failures
                body["assistant"] = assistant  # null when the assistant is off, as the real service sends it
                if ai_rule is not None:
                    body["ai_impact"] = ai_rule[2]
                if self.real:
                    finding_to_real(body)
                bodies.append((fid, dumps(body)))
                rows.append(FindingRow(
                    id=fid, issue_type="ai_sast" if ai else "sast", relevant_since=relevant, repo_id=repo.id,
                    repo_name=repo.name, ref=ref, is_primary=int(ref == repo.primary_branch), status=triage.status,
                    triage_state=triage.triage_state, triage_reason=triage.reason, severity=spec.severity,
                    confidence=spec.confidence, rule_name=body["rule_name"], match_based_id=match_based_id,
                    has_mates=mates, ticket_id=ticket["id"] if ticket else None, categories=categories,
                    autotriage_verdict=verdict, component_tag=component_tag, ctf_state=ctf_state, pro_rule=pro,
                    rulesets=rulesets))
        return rows, bodies

    def _sca_chunk(self, rng: Draw, first_id: int, size: int) -> Batch:
        rows: list[FindingRow] = []
        bodies: list[tuple[int, bytes]] = []
        dumps = orjson.dumps
        advisories = self.world.advisories
        for repo, refs, ids in self._groups(rng, first_id, size):
            index = rng.between(0, len(advisories) - 1)
            advisory = advisories[index]
            triage = _Triage(rng)
            reachability = rng.weighted(REACHABILITY, REACHABILITY_WEIGHTS)
            transitivity = rng.weighted(TRANSITIVITIES, TRANSITIVITY_WEIGHTS)
            malicious = rng.random() < 0.01
            lockfile = rng.pick(vocab.LOCKFILES[advisory.ecosystem])
            line = rng.between(5, 4000)
            ticket = _ticket(rng, ids[0], ids) if rng.random() < 0.05 and triage.status != "fixed" else None
            match_based_id = f"{rng.getrandbits(128):032x}"
            syntactic_id = f"{rng.getrandbits(128):032x}"
            usage_path = rng.pick(vocab.FILE_PATHS.get(repo.language, vocab.FILE_PATHS["generic"]))
            location = {"filePath": lockfile, "line": line, "column": 1, "endLine": line, "endColumn": 80}
            usage_location = _location(rng, usage_path)
            epss = {"percentile": round(min(0.9999, advisory.epss ** 0.25), 5), "score": advisory.epss}
            fixes = [] if advisory.fix_version is None else [{"package": advisory.package,
                                                               "version": advisory.fix_version}]
            mates = 1 if len(ids) > 1 else 0
            for fid, ref in zip(ids, refs, strict=True):
                body, relevant = self._common(rng, fid, repo, ref, triage, match_based_id, syntactic_id,
                                              location, ticket)
                body["severity"] = advisory.severity
                body["confidence"] = "high"
                body["categories"] = ["security"]
                body["rule"] = self.sca_rule_frags[index]
                body["rule_name"] = advisory.rule_name
                body["rule_message"] = None
                body["epss_score"] = epss
                body["fix_recommendations"] = fixes
                body["found_dependency"] = {
                    "ecosystem": advisory.ecosystem, "package": advisory.package, "version": advisory.version,
                    "transitivity": transitivity,
                    "lockfile_line_url": f"{repo.url}/blob/{repo.commits[ref]}/{lockfile}#L{line}",
                }
                body["is_malicious"] = malicious
                body["reachability"] = reachability
                body["reachable_condition"] = (rng.pick(vocab.REACHABLE_CONDITIONS)
                                               if reachability == "conditionally_reachable" else "")
                body["usage"] = {"location": usage_location, "external_ticket": ticket}
                body["vulnerability_identifier"] = advisory.identifier
                if self.real:
                    body["usage"] = {"location": real_usage_location(
                        usage_location, f"{repo.url}/blob/{repo.commits[ref]}/{usage_path}#L{usage_location['line']}"),
                        "external_ticket": ticket}
                    finding_to_real(body)
                bodies.append((fid, dumps(body)))
                rows.append(FindingRow(
                    id=fid, issue_type="sca", relevant_since=relevant, repo_id=repo.id, repo_name=repo.name,
                    ref=ref, is_primary=int(ref == repo.primary_branch), status=triage.status,
                    triage_state=triage.triage_state, triage_reason=triage.reason, severity=advisory.severity,
                    confidence="high", rule_name=advisory.rule_name, match_based_id=match_based_id,
                    has_mates=mates, ticket_id=ticket["id"] if ticket else None, categories="|security|",
                    reachability=reachability, transitivity=transitivity, is_malicious=int(malicious),
                    dependency=advisory.package, epss=advisory.epss))
        return rows, bodies

    def _secrets_chunk(self, rng: Draw, first_id: int, size: int) -> Batch:
        rows: list[FindingRow] = []
        bodies: list[tuple[int, bytes]] = []
        for repo, refs, ids in self._groups(rng, first_id, size):
            secret_type, rule_name = rng.pick(vocab.SECRET_TYPES)
            triage = _Triage(rng)
            validation = "valid" if rng.random() < 0.3 else "invalid"
            historical = rng.random() < 0.25
            severity = "critical" if validation == "valid" else rng.pick(("high", "medium"))
            confidence = rng.pick(("high", "medium"))
            ticket = _ticket(rng, ids[0], ids) if rng.random() < 0.05 and triage.status != "fixed" else None
            match_based_id = f"{rng.getrandbits(128):032x}"
            location = _location(rng, rng.pick(vocab.FILE_PATHS["generic"] + vocab.FILE_PATHS[repo.language]))
            mates = 1 if len(ids) > 1 else 0
            for fid, ref in zip(ids, refs, strict=True):
                body, relevant = self._common(rng, fid, repo, ref, triage, match_based_id,
                                              f"{rng.getrandbits(128):032x}", location, ticket)
                body["severity"] = severity
                body["confidence"] = confidence
                body["rule_name"] = rule_name
                body["secret_type"] = secret_type
                body["validation_state"] = validation
                body["repository_visibility"] = repo.visibility
                body["historical"] = historical
                bodies.append((fid, orjson.dumps(body)))
                rows.append(FindingRow(
                    id=fid, issue_type="secrets", relevant_since=relevant, repo_id=repo.id, repo_name=repo.name,
                    ref=ref, is_primary=int(ref == repo.primary_branch), status=triage.status,
                    triage_state=triage.triage_state, triage_reason=triage.reason, severity=severity,
                    confidence=confidence, rule_name=rule_name, match_based_id=match_based_id, has_mates=mates,
                    ticket_id=ticket["id"] if ticket else None, secret_type=secret_type,
                    validation_state=validation, visibility=repo.visibility, historical=int(historical)))
        return rows, bodies
