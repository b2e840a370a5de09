"""Policy tuning: rule statistics from the warehouse's findings, mode-change proposals, and applying them.

A policy rule's ``path`` is the same string as a code finding's ``rule_name``; statistics join on it.

Statistics per rule (code findings only, every status and branch):

- ``findings``: code findings of the rule;
- ``autotriaged``: those with an autotriage verdict; ``false_positive_share`` and ``true_positive_share`` are
  the shares of each verdict among them (empty when none has a verdict);
- ``human_triaged``: findings a person triaged (a triage state other than ``untriaged``), leaving out those
  this pipeline's own bulk triage changed (``triage_actions``); ``human_false_positive_share`` is the share of
  them ignored as ``false_positive``.

A threshold (``ModeRule``) proposes ``to_mode`` for a rule whose current mode is in ``from_modes`` when its
metric is strictly above ``above`` over a sample (the metric's denominator) of at least ``min_findings``. The
first threshold that matches a rule wins (configuration order).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from findings_provider.client.errors import FindingsApiError, NotFoundError, PolicyApiRetiredError
from findings_provider.client.vocabulary import TRIAGED_STATUSES, AutotriageVerdict, IssueType
from findings_provider.governance.common import model_json, prune_missing, read_frame
from findings_provider.pipeline.alert import Alert
from findings_provider.text import md_escape
from findings_provider.warehouse import policy_rule_rows
from findings_provider.warehouse.schema import findings, policy_rules, triage_actions

if TYPE_CHECKING:
    import pandas as pd

    from findings_provider.client import FindingsClient
    from findings_provider.config import ModeRule
    from findings_provider.warehouse import Warehouse

log = logging.getLogger(__name__)

#: The sample (denominator) each metric is measured over; ``min_findings`` applies to it.
METRIC_SAMPLE = {
    "false_positive_share": "autotriaged",
    "true_positive_share": "autotriaged",
    "human_false_positive_share": "human_triaged",
}
STAT_COLUMNS = [
    "findings",
    "autotriaged",
    "false_positive_share",
    "true_positive_share",
    "human_triaged",
    "human_false_positive_share",
]
PROPOSAL_COLUMNS = [
    "policy_id",
    "rule_id",
    "rule_path",
    "current_mode",
    "proposed_mode",
    "threshold",
    "metric",
    "value",
    "sample",
    "findings",
]
UNTRIAGED = ("untriaged", "")


# --- listing rules into the warehouse -----------------------------------------------------------------------


def select_policies(client: FindingsClient, policy_ids: Sequence[str] | None) -> list[str]:
    """The policy ids to work on: those given, else every policy the deployment lists."""
    if policy_ids:
        return [str(p) for p in policy_ids]
    ids = [str(p.id) for p in client.list_policies() if p.id is not None]
    log.info("no policies configured: using every policy the deployment lists (%d): %s", len(ids), ids)
    return ids


def sync_policy_rules(
    client: FindingsClient, warehouse: Warehouse, policy_ids: Sequence[str], *, limit: int | None = None
) -> dict[str, int]:
    """Pull every rule of each policy (cursor pagination) into ``policy_rules``; drop rules no longer listed.

    Returns rules pulled per policy id.
    """
    counts: dict[str, int] = {}
    for policy_id in policy_ids:
        seen: set[str] = set()
        total = 0
        for page_no, page in enumerate(client.pages(client.list_policy_rules, policy_id, limit=limit), start=1):
            rows = policy_rule_rows(policy_id, [model_json(rule) for rule in page.rules])
            warehouse.upsert_policy_rules(rows)
            seen.update(row[1] for row in rows)
            total += len(rows)
            log.info("policy %s: pulled %d rules, page %d, %d total", policy_id, len(rows), page_no, total)
        pruned = prune_missing(warehouse, policy_rules, seen, where=policy_rules.c.policy_id == policy_id)
        if pruned:
            log.info("policy %s: removed %d rules no longer listed", policy_id, pruned)
        counts[policy_id] = total
    return counts


# --- statistics and proposals -------------------------------------------------------------------------------


def read_rules(warehouse: Warehouse, policy_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """The stored rules of ``policy_ids`` (all when None): policy_id, rule_id, rule_path, current_mode."""
    stmt = select(
        policy_rules.c.policy_id,
        policy_rules.c.id.label("rule_id"),
        policy_rules.c.path.label("rule_path"),
        policy_rules.c.policy_mode.label("current_mode"),
    )
    if policy_ids is not None:
        stmt = stmt.where(policy_rules.c.policy_id.in_(list(policy_ids)))
    return read_frame(warehouse, stmt.order_by(policy_rules.c.policy_id, policy_rules.c.path))


def read_code_findings(warehouse: Warehouse) -> pd.DataFrame:
    """The columns of the warehouse's code findings the statistics need."""
    c = findings.c
    stmt = select(
        c.id, c.rule_name, c.match_based_id, c.status, c.triage_state, c.triage_reason, c.autotriage_verdict
    ).where(c.issue_type == IssueType.SAST.value)
    return read_frame(warehouse, stmt)


def pipeline_triaged_ids(warehouse: Warehouse) -> set[int]:
    """Code findings this pipeline's own bulk triage changed (not a person's verdict)."""
    stmt = select(triage_actions.c.issue_ids, triage_actions.c.response).where(
        triage_actions.c.issue_type == IssueType.SAST.value,
        triage_actions.c.dry_run.is_(False),
        triage_actions.c.status == "succeeded",
    )
    ids: set[int] = set()
    with warehouse.engine.connect() as conn:
        for issue_ids, response in conn.execute(stmt):
            ids.update(int(i) for i in issue_ids or ())
            if isinstance(response, dict):
                ids.update(int(i) for i in response.get("triaged_issues") or ())
    return ids


def rule_statistics(
    code_findings: pd.DataFrame, *, exclude_from_human: Iterable[int] = (), dedupe_fingerprints: bool = False
) -> pd.DataFrame:
    """Per ``rule_name``: the ``STAT_COLUMNS`` (counts and shares, see the module docstring).

    With ``dedupe_fingerprints`` findings of the same rule and ``match_based_id`` (one issue on several
    branches) count once.
    """
    import pandas as pd

    df = code_findings[code_findings["rule_name"].notna()].copy()
    if dedupe_fingerprints and not df.empty:
        keyed = df["match_based_id"].notna()
        df = pd.concat([df[keyed].drop_duplicates(["rule_name", "match_based_id"]), df[~keyed]])
    verdict = df["autotriage_verdict"]
    state = df["triage_state"].fillna("")
    excluded = df["id"].isin(set(exclude_from_human))
    human = (~state.isin(UNTRIAGED) | df["status"].isin(TRIAGED_STATUSES)) & ~excluded
    ignored = state.eq("ignored") | df["status"].eq("ignored")
    flags = pd.DataFrame(
        {
            "rule_name": df["rule_name"],
            "findings": 1,
            "autotriaged": verdict.isin([v.value for v in AutotriageVerdict]).astype(int),
            "auto_fp": verdict.eq("false_positive").astype(int),
            "auto_tp": verdict.eq("true_positive").astype(int),
            "human_triaged": human.astype(int),
            "human_fp": (human & ignored & df["triage_reason"].eq("false_positive")).astype(int),
        }
    )
    sums = flags.groupby("rule_name").sum()
    out = pd.DataFrame(index=sums.index)
    out["findings"] = sums["findings"]
    out["autotriaged"] = sums["autotriaged"]
    out["false_positive_share"] = _share(sums["auto_fp"], sums["autotriaged"])
    out["true_positive_share"] = _share(sums["auto_tp"], sums["autotriaged"])
    out["human_triaged"] = sums["human_triaged"]
    out["human_false_positive_share"] = _share(sums["human_fp"], sums["human_triaged"])
    out.index.name = "rule_path"
    return out[STAT_COLUMNS]


def _share(part: pd.Series, whole: pd.Series) -> pd.Series:
    return (part / whole.where(whole > 0)).astype(float)


def evaluate_rules(rules: pd.DataFrame, stats: pd.DataFrame) -> pd.DataFrame:
    """Each rule with its statistics (rules without findings get zero counts and empty shares)."""
    merged = rules.merge(stats, how="left", left_on="rule_path", right_index=True)
    for column in ("findings", "autotriaged", "human_triaged"):
        merged[column] = merged[column].fillna(0).astype(int)
    return merged.reset_index(drop=True)


def propose_changes(evaluated: pd.DataFrame, thresholds: Sequence[ModeRule]) -> pd.DataFrame:
    """The mode changes the thresholds propose, one row per (policy, rule), columns ``PROPOSAL_COLUMNS``."""
    import pandas as pd

    decided = pd.Series(False, index=evaluated.index)
    parts = []
    for rule in thresholds:
        sample_column = METRIC_SAMPLE[rule.metric]
        value = evaluated[rule.metric]
        sample = evaluated[sample_column]
        hit = (
            ~decided
            & evaluated["current_mode"].isin([str(m) for m in rule.from_modes])
            & (sample >= rule.min_findings)
            & value.notna()
            & (value > rule.above)
            & (evaluated["current_mode"] != str(rule.to_mode))
        )
        decided |= hit
        if hit.any():
            chosen = evaluated[hit]
            parts.append(
                pd.DataFrame(
                    {
                        "policy_id": chosen["policy_id"],
                        "rule_id": chosen["rule_id"],
                        "rule_path": chosen["rule_path"],
                        "current_mode": chosen["current_mode"],
                        "proposed_mode": str(rule.to_mode),
                        "threshold": rule.name,
                        "metric": rule.metric,
                        "value": value[hit].round(4),
                        "sample": sample[hit].astype(int),
                        "findings": chosen["findings"].astype(int),
                    }
                )
            )
    if not parts:
        return pd.DataFrame(columns=PROPOSAL_COLUMNS)
    out = pd.concat(parts)[PROPOSAL_COLUMNS]
    return out.sort_values(["policy_id", "rule_path"]).reset_index(drop=True)


def proposal_records(proposals: pd.DataFrame) -> list[dict[str, Any]]:
    """Proposals as JSON-ready dicts (plain Python scalars)."""
    records = []
    for row in proposals.to_dict("records"):
        records.append(
            {
                **{k: (None if row[k] is None else str(row[k])) for k in PROPOSAL_COLUMNS[:7]},
                "value": float(row["value"]),
                "sample": int(row["sample"]),
                "findings": int(row["findings"]),
            }
        )
    return records


def describe(p: dict[str, Any]) -> str:
    """One log line for a proposal."""
    return (
        f"policy {p['policy_id']} rule {p['rule_path']}: {p['current_mode']} -> {p['proposed_mode']} "
        f"({p['metric']} {p['value']:.0%} over {p['sample']} findings; threshold {p['threshold']})"
    )


def approval_markdown(proposals: Sequence[dict[str, Any]], report_path: str | None, limit: int = 30) -> str:
    """A markdown summary of the proposals for the person who approves them (capped at ``limit`` rows).

    Rule paths, policy ids and modes come from the service: each is escaped (``md_escape``), so none can add
    table rows, links, images or HTML to the request the approver reads.
    """
    lines = [
        f"**{len(proposals)} rule mode changes proposed.** Approve to apply them with the update-policy "
        "call; each applied change is recorded in `policy_changes` with the previous mode.",
        "",
        "| policy | rule | current | proposed | metric | value | sample |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in proposals[:limit]:
        cells = [md_escape(p[k]) for k in ("policy_id", "rule_path", "current_mode", "proposed_mode", "metric")]
        lines.append("| " + " | ".join([*cells, f"{float(p['value']):.0%}", str(int(p["sample"]))]) + " |")
    if len(proposals) > limit:
        lines.append(f"\n... and {len(proposals) - limit} more: see the full report.")
    if report_path:
        lines.append(f"\nFull report: {md_escape(report_path, limit=1000)}")
    return "\n".join(lines)


# --- applying -----------------------------------------------------------------------------------------------


class PolicyApiRetiredDuringApply(Exception):
    """The policy API answered ``410 Gone`` while approved changes were being applied (the deployment migrated
    after the proposal). Every proposal is recorded in ``policy_changes`` by then: those sent before the 410 with
    their status, the rest ``not_applied``. ``counts`` per status; ``applied`` and ``not_applied`` describe the
    proposals (:func:`describe`); ``error`` is the 410."""

    def __init__(self, error: PolicyApiRetiredError, counts: dict[str, int], applied: list[str],
                 not_applied: list[str]) -> None:
        self.error = error
        self.counts = counts
        self.applied = applied
        self.not_applied = not_applied
        super().__init__(
            f"the policy API was retired while applying: {counts['applied']} rule mode changes applied before the "
            f"410 Gone, {len(not_applied)} not applied ({error})"
        )


def apply_policy_changes(
    client: FindingsClient,
    warehouse: Warehouse,
    proposals: Sequence[dict[str, Any]],
    *,
    run_id: str | None,
) -> dict[str, int]:
    """Apply approved proposals with the update-policy call, recording each in ``policy_changes``.

    Each policy's rules are read again first: a rule whose mode changed since the proposal (someone edited it)
    is skipped, so ``previous_mode`` is always the mode the change replaced. A rule already in the proposed
    mode (a retried task) is not sent again. Statuses: ``applied``, ``already_applied``, ``skipped``,
    ``failed``, ``not_applied``. Failures are recorded, the rest continue, and the caller raises at the end. A
    retired policy API (410 Gone, on the read or on a write) stops at once: that proposal and every later one are
    recorded ``not_applied`` and :class:`PolicyApiRetiredDuringApply` is raised with the counts.
    """
    counts = {"applied": 0, "already_applied": 0, "skipped": 0, "failed": 0, "not_applied": 0}
    by_policy: dict[str, list[dict[str, Any]]] = {}
    response: dict[str, Any]
    for p in proposals:
        by_policy.setdefault(str(p["policy_id"]), []).append(p)
    ordered = [(policy_id, p) for policy_id, changes in sorted(by_policy.items()) for p in changes]
    applied: list[str] = []

    def record(policy_id: str, p: dict[str, Any], status: str, response: dict[str, Any]) -> None:
        warehouse.record_policy_change(
            run_id=run_id,
            policy_id=policy_id,
            rule_path=p["rule_path"],
            previous_mode=p["current_mode"],
            new_mode=p["proposed_mode"],
            status=status,
            response=response,
        )
        counts[status] += 1

    done = 0
    current: dict[str | None, str | None] = {}
    try:
        for index, (policy_id, p) in enumerate(ordered):
            if index == 0 or ordered[index - 1][0] != policy_id:
                current = {r.path: r.policyMode for r in client.items(client.list_policy_rules, policy_id)}
            path, previous, new = p["rule_path"], p["current_mode"], p["proposed_mode"]
            now = current.get(path)
            if now == new:
                status, response = "already_applied", {"current_mode": now}
                log.info("ALREADY %s", describe(p))
            elif now != previous:
                status, response = (
                    "skipped",
                    {"reason": "mode changed since the proposal", "current_mode": now},
                )
                log.warning("SKIP %s: the rule is now %s", describe(p), now if now else "not listed")
            else:
                try:
                    result = client.update_rule_mode(policy_id, path, new)
                except PolicyApiRetiredError:
                    raise
                except FindingsApiError as exc:
                    status, response = "failed", {"error": str(exc), "status_code": exc.status_code}
                    log.error("FAILED %s: %s", describe(p), exc)
                    if isinstance(exc, NotFoundError):
                        status = "skipped"
                else:
                    status, response = "applied", model_json(result)
                    if result.updatedRule is not None:
                        warehouse.upsert_policy_rules(policy_rule_rows(policy_id, [model_json(result.updatedRule)]))
                    log.info("APPLIED %s", describe(p))
                    applied.append(describe(p))
            record(policy_id, p, status, response)
            done = index + 1
    except PolicyApiRetiredError as exc:
        not_applied = []
        for policy_id, p in ordered[done:]:
            record(policy_id, p, "not_applied", {
                "reason": "the policy API answered 410 Gone (DEPLOYMENT_MIGRATED) before this change was sent",
                "error": str(exc), "status_code": exc.status_code})
            not_applied.append(describe(p))
            log.warning("NOT APPLIED %s: the policy API was retired", describe(p))
        raise PolicyApiRetiredDuringApply(exc, dict(counts), applied, not_applied) from exc
    return counts


# --- report -------------------------------------------------------------------------------------------------


def report_tables(evaluated: pd.DataFrame, proposals: pd.DataFrame, top: int = 25) -> dict[str, pd.DataFrame]:
    """The tables of the policy tuning report: proposals, the chart's shares, and every rule's statistics."""
    stats = evaluated.sort_values(["findings", "policy_id", "rule_path"], ascending=[False, True, True]).set_index(
        ["policy_id", "rule_path"]
    )[["current_mode", *STAT_COLUMNS]]
    with_findings = evaluated[evaluated["autotriaged"] > 0].drop_duplicates("rule_path")
    shares = (
        with_findings.sort_values(["false_positive_share", "autotriaged"], ascending=False)
        .head(top)
        .set_index("rule_path")[["false_positive_share", "true_positive_share"]]
    )
    return {
        "proposed changes": proposals.set_index(["policy_id", "rule_path"]),
        f"false-positive share per rule (top {top})": shares,
        "rule statistics": stats,
    }


# --- a retired policy API -----------------------------------------------------------------------------------

#: ``pipeline_state`` key of the record that the deployment's policy API answered ``410 Gone``
#: (``DEPLOYMENT_MIGRATED``); read by the list task before it calls the API, and by the dashboard's policies view.
RETIRED_STATE = "policy_tuning/retired"


def retired_configuration(
    *, findings_conn_id: str, base_url: str | None, deployment_id: str | None, deployment_slug: str | None,
    policy_ids: Sequence[str] | None, limit: int | None,
) -> dict[str, Any]:
    """What the policy API is called with: the connection (its service and deployment as configured, before any
    request) and the list task's policy-related arguments. Its digest decides whether a later run tries again."""
    return {
        "findings_conn_id": findings_conn_id,
        "base_url": base_url,
        "deployment_id": deployment_id,
        "deployment_slug": deployment_slug,
        "policy_ids": list(policy_ids) if policy_ids else None,
        "limit": limit,
    }


def configuration_digest(configuration: dict[str, Any]) -> str:
    """A stable digest of ``configuration`` (JSON with sorted keys, SHA-256)."""
    import hashlib
    import json

    text = json.dumps(configuration, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def retired_record(warehouse: Warehouse) -> dict[str, Any] | None:
    """The stored record of a retired policy API, or None."""
    record = warehouse.get_state(RETIRED_STATE)
    return record if isinstance(record, dict) else None


def known_retired(warehouse: Warehouse, configuration: dict[str, Any]) -> dict[str, Any] | None:
    """The record of a retired policy API when it was seen with this same ``configuration`` (then calling the API
    again would meet the same 410), else None (no record, or the configuration changed since: try again)."""
    record = retired_record(warehouse)
    if record is None or record.get("digest") != configuration_digest(configuration):
        return None
    return record


def clear_retired(warehouse: Warehouse) -> bool:
    """Forget a record of a retired policy API (the API answered again); True when there was one."""
    if retired_record(warehouse) is None:
        return False
    warehouse.set_state(RETIRED_STATE, None)
    return True


def record_retired(
    warehouse: Warehouse,
    error: PolicyApiRetiredError,
    configuration: dict[str, Any],
    *,
    deployment_id: str | None,
    deployment_slug: str | None,
    dag_id: str | None,
    run_id: str | None,
    now: datetime | None = None,
    interrupted: PolicyApiRetiredDuringApply | None = None,
) -> dict[str, Any]:
    """Store (replacing any earlier one) and return the record that the policy API answered 410 Gone; with
    ``interrupted`` (the 410 came while applying approved changes) also what was applied and what was not."""
    seen = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
    record = {
        "seen_at": seen.isoformat(),
        "deployment_id": deployment_id,
        "deployment_slug": deployment_slug,
        "policy_ids": configuration.get("policy_ids"),
        "endpoint": error.endpoint,
        "status_code": error.status_code,
        "error": str(error),
        "dag_id": dag_id,
        "run_id": run_id,
        "configuration": configuration,
        "digest": configuration_digest(configuration),
    }
    if interrupted is not None:
        record["during_apply"] = {"applied": interrupted.applied, "not_applied": interrupted.not_applied,
                                  "counts": interrupted.counts}
    warehouse.set_state(RETIRED_STATE, record)
    return record


def deployment_label(record: dict[str, Any]) -> str:
    """The deployment of a record, as people name it (slug and id when known)."""
    slug, ident = record.get("deployment_slug"), record.get("deployment_id")
    if slug and ident:
        return f"{slug} ({ident})"
    return str(slug or ident or "the connection's deployment")


def retired_message(record: dict[str, Any]) -> str:
    """Why policy tuning does nothing, and what to do, in a few sentences (alert, log, dashboard)."""
    policies = record.get("policy_ids")
    which = f"policies {', '.join(policies)}" if policies else "every policy the deployment lists"
    return (
        f"The service retired its policy API for deployment {deployment_label(record)} "
        f"(410 Gone, DEPLOYMENT_MIGRATED, seen {record.get('seen_at', '?')} by run {record.get('run_id') or '?'}, "
        f"for {which}): the deployment migrated to the service's newer policy system, where rule modes are now "
        "managed. policy_tuning cannot list or change rules any more. Move to the newer policy system, then pause "
        "or remove the policy_tuning DAG, or remove its `policy_tuning.policies` configuration in "
        "include/pipeline.yaml. Until that configuration (or the connection) changes, policy_tuning runs skip "
        "without calling the policy API and without another alert; a changed configuration tries the API once more."
    )


def interrupted_message(record: dict[str, Any], limit: int = 20) -> str:
    """What an apply that met the 410 did and did not do (empty when the 410 came elsewhere)."""
    during = record.get("during_apply")
    if not isinstance(during, dict):
        return ""
    lines = [f"The 410 came while approved rule mode changes were being applied: {len(during['applied'])} applied "
             f"before it, {len(during['not_applied'])} not applied (policy_changes, status not_applied)."]
    for title, items in (("Applied", during["applied"]), ("Not applied", during["not_applied"])):
        if items:
            lines.append(f"{title}:")
            lines += [f"- {item}" for item in items[:limit]]
            if len(items) > limit:
                lines.append(f"- ... and {len(items) - limit} more")
    return "\n".join(lines)


def retired_alert(record: dict[str, Any], link: str | None = None) -> Alert:
    """The one ``policy_api_retired`` alert of a record."""
    interrupted = interrupted_message(record)
    return Alert(
        "policy_api_retired",
        f"policy_tuning: the service retired its policy API for deployment {deployment_label(record)}",
        retired_message(record) + (f"\n\n{interrupted}" if interrupted else "")
        + f"\n\nThe service answered: {record.get('error') or '410 Gone'}",
        link,
    )
