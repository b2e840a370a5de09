"""
### Findings extraction

Pulls code (`sast`), supply-chain (`sca`) and, when asked, AI (`ai_sast`) and `secrets` findings into the
warehouse table `findings`. Runs when scans completed (the `findings://warehouse/scans` Asset), daily, and on a
manual trigger.

- **extract_findings**: for each issue type, an incremental pull by a watermark on `relevant_since` (starting
  `overlap_minutes` before it), `page_size` 3000, streamed page by page into the warehouse (one transaction per
  page). The watermark advances only when the whole pull of that type succeeded, and never past the run's start
  plus 5 minutes (a finding dated in the future is stored and counted as `future_dated`, but cannot hide later
  findings). Because the API's `since` filters on `relevant_since` only, status and triage changes of older
  findings are caught by a full pull: with `full_refresh`, once in every period of `full_refresh_max_age_hours`
  (aligned on 00:00 UTC; default 24: the first run of each UTC day is a full pull, so such changes arrive within
  a day; the day a run stands for, by its logical date: a backfill or a re-run behaves like that day), and on
  `full_refresh_weekday` (kept for compatibility; either trigger suffices, null disables one). Secrets
  have no `since` filter and are always pulled completely. Values the warehouse cannot hold (an integer beyond
  64 bits, a NUL character) do not fail the task: the finding is stored with that field null (skipped when its
  id is unusable) and the result counts them in `rejected`, with a sample of `{id, field, reason}`.
- **publish_findings** updates the `findings://warehouse/findings` Asset when rows were written (starts
  `autotriage_triage`).
- **summarize_findings** logs a summary of open findings by severity, issue type and repository and writes it as
  an HTML and CSV report (`$FINDINGS_REPORT_DIR` or `$AIRFLOW_HOME/reports`).

**Params**

- `issue_types` (list of `sast`, `sca`, `ai_sast`, `secrets`; default from `include/pipeline.yaml`): what to pull.
- `full_refresh` (boolean, default false): pull everything, ignoring the watermark (reconciles status and triage
  changes of older findings).
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, TriggerRule
from findings_provider.assets import FINDINGS, SCANS
from findings_provider.client.canonical import ISSUE_TYPES
from findings_provider.config import load_pipeline_config
from findings_provider.dag_defaults import conn_ids, dag_settings
from findings_provider.operators.findings import (
    ExtractFindingsOperator,
    FindingsSummaryOperator,
    PublishAssetOperator,
)

CONFIG = load_pipeline_config()
CFG = CONFIG.findings_extraction
CONN = conn_ids(CONFIG)

with DAG(
    description="Pull code and supply-chain findings into the warehouse",
    tags=["findings", "security", "warehouse"],
    **dag_settings(CONFIG, "findings_extraction", schedule=CFG.schedule, assets=SCANS),
    doc_md=__doc__,
    params={
        "issue_types": Param(
            [str(t) for t in CFG.issue_types],
            type="array",
            items={"type": "string", "enum": list(ISSUE_TYPES)},
            minItems=1,
            uniqueItems=True,
            title="Issue types",
            description="Which findings to pull: sast (code), sca (supply chain), ai_sast (AI), secrets.",
        ),
        "full_refresh": Param(
            False,
            type="boolean",
            title="Full refresh",
            description="Pull everything regardless of the watermark (catches status and triage changes of older "
            "findings).",
        ),
    },
) as dag:
    extract = ExtractFindingsOperator(
        task_id="extract_findings",
        issue_types="{{ params.issue_types }}",
        full_refresh="{{ params.full_refresh }}",
        page_size=CFG.page_size,
        overlap_minutes=CFG.overlap_minutes,
        full_refresh_weekday=CFG.full_refresh_weekday,
        full_refresh_max_age_hours=CFG.full_refresh_max_age_hours,
        **CONN,
    )
    publish = PublishAssetOperator(
        task_id="publish_findings",
        changed=extract.output["written"],  # type: ignore[index]  # .output is typed XComArg; it is a PlainXComArg, which has []
        what="finding rows",
        asset=FINDINGS,
        pool="default_pool",
    )
    summary = FindingsSummaryOperator(
        task_id="summarize_findings",
        report_name="findings_summary",
        fix_days=CONFIG.sla.fix_days,
        alerts=CONFIG.alerts,
        trigger_rule=TriggerRule.NONE_FAILED,
        pool="default_pool",
        **CONN,
    )
    extract >> publish >> summary
