"""Operators of policy tuning: list policy rules, propose mode changes from triage statistics, apply them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any, NoReturn

from findings_provider.alerts import alerts_config, deliver
from findings_provider.client import PolicyApiRetiredError
from findings_provider.compat import AirflowSkipException
from findings_provider.config import AlertsConfig, ModeRule, model_list
from findings_provider.governance.common import as_id_list, preview, run_identity, state_key
from findings_provider.operators.base import FindingsBaseOperator
from findings_provider.operators.links import PolicyReportLink, RulesChangedLink
from findings_provider.pipeline import approval
from findings_provider.values import as_bool

PROPOSAL_STATE = "policy_tuning/proposal"
#: XCom key under which the list task pushes the configuration it calls the policy API with (what a record of a
#: retired policy API is keyed by), for the apply task to record a 410 it meets the same way.
CONFIGURATION_KEY = "policy_api_configuration"


def record_retired_and_alert(operator: FindingsBaseOperator, context: Any, warehouse: Any,
                             exc: PolicyApiRetiredError, configuration: dict[str, Any], client: Any,
                             alerts: AlertsConfig, interrupted: Any = None) -> dict[str, Any]:
    """Record that the policy API answered 410 Gone (``policy_tuning/retired``), send the one
    ``policy_api_retired`` alert, and return the record."""
    from findings_provider.dashboard.links import dashboard_url
    from findings_provider.governance import policy_tuning as pt

    dag_id, run_id = run_identity(context)
    record = pt.record_retired(warehouse, exc, configuration, deployment_id=client.deployment_id,
                               deployment_slug=client.deployment_slug, dag_id=dag_id, run_id=run_id,
                               interrupted=interrupted)
    operator.log.warning("%s", exc)
    delivery = deliver([pt.retired_alert(record, dashboard_url("policies"))], alerts, context=context,
                       logger=operator.log)
    operator.log.info("alert about the retired policy API: %s", delivery.as_dict())
    return record


class ListPolicyRulesOperator(FindingsBaseOperator):
    """List the rules of policies (cursor pagination) into the warehouse's ``policy_rules`` table.

    Rules a policy no longer lists are removed from the table.

    A deployment whose policy API was retired (``410 Gone``, ``DEPLOYMENT_MIGRATED``: it moved to the service's
    newer policy system) is said once: the task records it in ``pipeline_state``
    (``governance.policy_tuning.RETIRED_STATE``: when, which deployment and policies, and the configuration it was
    seen with), sends one ``policy_api_retired`` alert through ``alerts`` (what happened, what to do), and ends
    **skipped**. Later runs read that record first: while the configuration (the connection and this task's
    ``policy_ids`` and ``limit``) is unchanged, they skip at once, saying why, without calling the policy API and
    without another alert; a changed configuration calls the API again (and, if it still answers 410, records and
    alerts once more).

    Skipped rather than success: in the Airflow UI a skipped task (and the downstream tasks Airflow then skips:
    nothing to propose or apply) shows at a glance that nothing was done, while the run stays green; a green
    "success" would read as rules listed, and a red failure would repeat every scheduled run with nothing anyone
    can fix in Airflow. The log line and the alert say why.

    :param policy_ids: policy ids (numeric strings); empty or None: every policy the deployment lists.
        Templated (a list, a JSON list or a comma-separated string).
    :param limit: rules per page (1-2000; the API's default is 500).
    :param alerts: where the alert about a retired policy API goes (``alerts`` of pipeline.yaml; an
        ``AlertsConfig`` or its dict; None: it is logged as unrouted).
    :return: ``{"policy_ids": [...], "rules": n, "rules_per_policy": {id: n}}``; ``policy_ids`` is also pushed
        under its own XCom key, so a downstream task can take ``task.output["policy_ids"]``, and the configuration
        under ``policy_api_configuration`` (for :class:`ApplyPolicyChangesOperator` to record a 410 it meets).
    """

    lineage_reads = ("policies_list", "policy_rules")
    lineage_writes = ("policy_rules",)

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "policy_ids")

    def __init__(self, *, policy_ids: Any = None, limit: int | None = None,
                 alerts: AlertsConfig | dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy_ids = policy_ids
        self.limit = limit
        self.alerts = alerts_config(alerts)

    def run(self, context: Any) -> dict[str, Any]:
        from findings_provider.governance import policy_tuning as pt

        client = self.api_hook.client  # built from the connection: no request yet
        warehouse = self.warehouse_hook.get_warehouse()
        wanted = as_id_list(self.policy_ids)
        configuration = pt.retired_configuration(
            findings_conn_id=self.findings_conn_id, base_url=client.base_url, deployment_id=client.deployment_id,
            deployment_slug=client.deployment_slug, policy_ids=wanted, limit=self.limit,
        )
        known = pt.known_retired(warehouse, configuration)
        if known is not None:
            raise AirflowSkipException(
                "not calling the policy API: " + pt.retired_message(known) + " (already alerted; nothing sent)"
            )
        try:
            ids = pt.select_policies(client, wanted)
            counts = pt.sync_policy_rules(client, warehouse, ids, limit=self.limit)
        except PolicyApiRetiredError as exc:
            self._retired(context, warehouse, exc, configuration, client)
        if pt.clear_retired(warehouse):
            self.log.info("the policy API answered again: the record of its retirement is removed")
        self.log.info("pulled %d rules of %d policies: %s", sum(counts.values()), len(ids), counts)
        context["ti"].xcom_push(key="policy_ids", value=ids)
        context["ti"].xcom_push(key=CONFIGURATION_KEY, value=configuration)
        return {"policy_ids": ids, "rules": sum(counts.values()), "rules_per_policy": counts}

    def _retired(self, context: Any, warehouse: Any, exc: PolicyApiRetiredError, configuration: dict[str, Any],
                 client: Any) -> NoReturn:
        """Record the retired policy API, alert once, and skip the task."""
        from findings_provider.governance import policy_tuning as pt

        record = record_retired_and_alert(self, context, warehouse, exc, configuration, client, self.alerts)
        raise AirflowSkipException(pt.retired_message(record)) from exc


class ProposePolicyChangesOperator(FindingsBaseOperator):
    """Propose rule mode changes from the warehouse's triage statistics (pandas); write a report.

    Per rule (policy rule ``path`` = finding ``rule_name``): number of code findings, share of autotriage
    false and true positives, share a person triaged as false positive. A threshold proposes its ``to_mode``
    for a rule in one of its ``from_modes`` whose metric is above ``above`` over at least ``min_findings``
    findings.
    The proposal goes to the task log, to an HTML report and CSV files, and in full to the warehouse's
    ``pipeline_state`` (key in the XCom) for :class:`ApplyPolicyChangesOperator`. Nothing is changed here.
    Every change needs a person's approval: unless it is a dry run or nothing is proposed, the run's plan is
    recorded as needing one (``pipeline.approval``, kind ``policies``), where the apply task checks the answer;
    ``needs_approval`` is also pushed under its own XCom key (for ``dag_defaults.approval_steps``).

    :param policy_ids: policies whose rules are evaluated (None: every policy in ``policy_rules``). Templated.
    :param thresholds: the rules that propose a mode change (``policy_tuning.rules`` of pipeline.yaml: ``ModeRule``
        models or their dicts; an empty list proposes nothing).
    :param dry_run: recorded in the result; a dry run never needs approval. Templated.
    :param dedupe_fingerprints: count one issue found on several branches (same ``match_based_id``) once.
    :param report_dir: directory of the report (default ``$FINDINGS_REPORT_DIR/policy_tuning``).
    :return: ``{"proposed", "rules_evaluated", "dry_run", "needs_approval", "proposal_key", "report",
        "preview" (first rows), "approval_subject", "approval_body" (markdown for the approver)}``.
    """

    operator_extra_links = (PolicyReportLink(),)

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "policy_ids", "is_dry_run")

    def __init__(
        self,
        *,
        policy_ids: Any = None,
        thresholds: Sequence[Any],
        dry_run: Any = True,
        dedupe_fingerprints: bool = False,
        report_dir: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.policy_ids = policy_ids
        self.thresholds = model_list(ModeRule, thresholds, "thresholds")
        self.is_dry_run = dry_run  # templated; not ``dry_run``, which is BaseOperator's method
        self.dedupe_fingerprints = dedupe_fingerprints
        self.report_dir = report_dir

    def run(self, context: Any) -> dict[str, Any]:
        from pathlib import Path

        from findings_provider.governance import policy_tuning as pt
        from findings_provider.reports import Chart, log_table, report_dir, write_report

        dry_run = as_bool(self.is_dry_run, "dry_run")
        warehouse = self.warehouse_hook.get_warehouse()
        thresholds = self.thresholds
        rules = pt.read_rules(warehouse, as_id_list(self.policy_ids))
        stats = pt.rule_statistics(
            pt.read_code_findings(warehouse),
            exclude_from_human=pt.pipeline_triaged_ids(warehouse),
            dedupe_fingerprints=self.dedupe_fingerprints,
        )
        evaluated = pt.evaluate_rules(rules, stats)
        proposals = pt.propose_changes(evaluated, thresholds)
        records = pt.proposal_records(proposals)
        self.log.info(
            "evaluated %d rules (%d with findings) against %d thresholds: %d changes proposed%s",
            len(evaluated),
            int((evaluated["findings"] > 0).sum()),
            len(thresholds),
            len(records),
            " (dry run: nothing will be applied)" if dry_run else "",
        )
        for record in records:
            self.log.info("PROPOSE %s", pt.describe(record))
        log_table(self.log, "Proposed rule mode changes", proposals)

        dag_id, run_id = run_identity(context)
        tables = pt.report_tables(evaluated, proposals)
        share_table = next(name for name in tables if name.startswith("false-positive share"))
        report = write_report(
            f"policy_tuning__{run_id or 'adhoc'}",
            "Policy tuning: proposed rule mode changes" + (" (dry run)" if dry_run else ""),
            tables,
            charts=[Chart("Autotriage verdicts per rule", table=share_table, stacked=True)],
            notes=[
                f"{len(records)} change(s) proposed from {len(evaluated)} rules. Thresholds: "
                + "; ".join(
                    f"{t.name}: {'/'.join(map(str, t.from_modes))} -> {t.to_mode} when {t.metric} > "
                    f"{t.above:.0%} over at least {t.min_findings} findings"
                    for t in thresholds
                ),
                "Dry run: nothing is applied." if dry_run else "Changes apply only after approval in the UI.",
            ],
            out_dir=Path(self.report_dir) if self.report_dir else report_dir("policy_tuning"),
            warehouse=warehouse,
            kind="policy_tuning",
        )
        self.log.info("report: %s", report.html)
        key = state_key(PROPOSAL_STATE, dag_id, run_id)
        warehouse.set_state(key, {"proposals": records, "dry_run": dry_run, "report": report.html})
        needs_approval = bool(records) and not dry_run
        reasons = [f"{len(records)} rule mode changes proposed: every change needs a person's approval"]
        planned = Counter(str(record["policy_id"]) for record in records)  # changes per policy
        approval.record_plan(warehouse, approval.POLICIES, run_id, reasons=reasons if needs_approval else [],
                             planned=dict(planned))
        context["ti"].xcom_push(key="needs_approval", value=needs_approval)
        return {
            "proposed": len(records),
            "rules_evaluated": len(evaluated),
            "dry_run": dry_run,
            "needs_approval": needs_approval,
            "proposal_key": key,
            "report": report.as_xcom(),
            "preview": preview(records),
            "approval_subject": f"Apply {len(records)} rule mode changes?",
            "approval_body": pt.approval_markdown(records, report.html),
        }


class ApplyPolicyChangesOperator(FindingsBaseOperator):
    """Apply proposed rule mode changes with the update-policy call, each recorded in ``policy_changes``.

    The proposals come from ``proposals`` or, by default, from the warehouse entry named by the XCom of the
    task ``propose_task_id``. Changes apply only when a person approved this run's plan: the task checks the
    decision recorded in the warehouse (``pipeline.approval``, kind ``policies``, written by
    ``PlanApprovalOperator``) itself, so an approval task marked successful by hand is not consent; without a
    recorded approval, or after a rejection, it fails and applies nothing. A dry run, or nothing proposed,
    applies nothing and needs no approval. Each applied change is logged with the rule's previous mode, new
    mode, status and the API's response, so it can be reverted. A rule whose mode changed since the proposal is
    skipped. Failures are recorded and fail the task at the end (a retry sends only what is still missing).

    A policy API retired between the proposal and the apply (``410 Gone``, ``DEPLOYMENT_MIGRATED``, on the read of
    the rules or on a write) is said once, as the list task says it: the changes sent before it stay recorded as
    they were, every other proposal is recorded ``not_applied`` in ``policy_changes``, the retirement is recorded
    (``policy_tuning/retired``, with what was and was not applied, under the list task's configuration so later
    runs skip at its first step), one ``policy_api_retired`` alert lists both, and the task ends **skipped**.

    :param propose_task_id: task whose XCom carries ``proposal_key`` (a ``ProposePolicyChangesOperator``).
    :param proposals: explicit proposals (dicts with policy_id, rule_path, current_mode, proposed_mode, ...);
        they too apply only with this run's recorded approval.
    :param dry_run: log what would be applied and change nothing. Templated.
    :param list_task_id: the :class:`ListPolicyRulesOperator` of the run, whose ``policy_api_configuration``
        XCom keys the record of a retired policy API (None, or no such XCom: the connection with every policy).
    :param alerts: where the alert about a policy API retired during the apply goes (``alerts`` of pipeline.yaml;
        an ``AlertsConfig`` or its dict; None: it is logged as unrouted).
    """

    operator_extra_links = (RulesChangedLink(),)

    lineage_writes = ("policy_changes",)

    template_fields: Sequence[str] = (*FindingsBaseOperator.template_fields, "is_dry_run", "proposals")

    def __init__(
        self,
        *,
        propose_task_id: str | None = "propose_policy_changes",
        proposals: Any = None,
        dry_run: Any = False,
        list_task_id: str | None = "list_policy_rules",
        alerts: AlertsConfig | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.propose_task_id = propose_task_id
        self.proposals = proposals
        self.is_dry_run = dry_run  # templated; not ``dry_run``, which is BaseOperator's method
        self.list_task_id = list_task_id
        self.alerts = alerts_config(alerts)

    def _load(self, context: Any, warehouse: Any) -> list[dict[str, Any]]:
        if self.proposals is not None:
            return list(self.proposals)
        summary = context["ti"].xcom_pull(task_ids=self.propose_task_id) or {}
        key = summary.get("proposal_key")
        if not key:
            raise ValueError(f"task {self.propose_task_id!r} left no proposal_key in its XCom")
        state = warehouse.get_state(key)
        if state is None:
            raise ValueError(f"no proposal stored in the warehouse under {key!r}")
        return list(state["proposals"])

    def run(self, context: Any) -> dict[str, Any]:
        from findings_provider.governance.policy_tuning import (
            PolicyApiRetiredDuringApply,
            apply_policy_changes,
            describe,
        )

        warehouse = self.warehouse_hook.get_warehouse()
        proposals = self._load(context, warehouse)
        if as_bool(self.is_dry_run, "dry_run"):
            for p in proposals:
                self.log.info("DRY RUN would apply %s", describe(p))
            return {"dry_run": True, "approved": None, "proposed": len(proposals), "applied": 0}
        if not proposals:
            self.log.info("nothing proposed: nothing to apply")
            return {"dry_run": False, "approved": None, "proposed": 0, "applied": 0}
        _, run_id = run_identity(context)
        record = approval.get_plan(warehouse, approval.POLICIES, run_id)
        if record is None or not record.get("needs_approval"):  # every change needs a person's approval
            raise approval.ApprovalError(
                f"not applying {len(proposals)} rule mode changes: run {run_id!r} recorded no proposal for a "
                "person to approve; propose them in the same run (ProposePolicyChangesOperator, not a dry run) "
                "and have a person approve them"
            )
        problem = approval.missing_approval(record)
        if problem:
            raise approval.ApprovalError(f"not applying rule mode changes: {problem}")
        client = self.api_hook.client
        try:
            counts = apply_policy_changes(client, warehouse, proposals, run_id=run_id)
        except PolicyApiRetiredDuringApply as exc:
            self._retired(context, warehouse, exc, client, len(proposals))
        self.log.info("policy changes of %d proposals approved by %s: %s", len(proposals),
                      record["decision"]["by"], counts)
        if counts["failed"]:
            raise RuntimeError(
                f"{counts['failed']} of {len(proposals)} rule mode changes failed (see policy_changes and "
                "the log above); a retry applies only what is still missing"
            )
        return {"dry_run": False, "approved": True, "proposed": len(proposals), **counts}

    def _retired(self, context: Any, warehouse: Any, exc: Any, client: Any, proposed: int) -> NoReturn:
        """Record the policy API retired during the apply (with what was applied), alert once, skip the task."""
        from findings_provider.governance import policy_tuning as pt

        configuration = None
        if self.list_task_id is not None:
            configuration = context["ti"].xcom_pull(task_ids=self.list_task_id, key=CONFIGURATION_KEY)
        if not isinstance(configuration, dict):  # no list task in this run: the connection with every policy
            configuration = pt.retired_configuration(
                findings_conn_id=self.findings_conn_id, base_url=client.base_url,
                deployment_id=client.deployment_id, deployment_slug=client.deployment_slug, policy_ids=None,
                limit=None)
        record = record_retired_and_alert(self, context, warehouse, exc.error, configuration, client, self.alerts,
                                          interrupted=exc)
        raise AirflowSkipException(
            f"{exc.counts['applied']} of {proposed} rule mode changes applied before the policy API answered "
            f"410 Gone, {len(exc.not_applied)} not applied (policy_changes, status not_applied). "
            + pt.retired_message(record)
        ) from exc
