"""
### Scan monitoring

Every 15 minutes (and on a manual trigger) this DAG watches the deployment's scans:

1. **search_scans** searches scans since the last successful search (minus `overlap_minutes` from
   `include/pipeline.yaml`) and stores them in the warehouse table `scans`. The first run, or one with no
   earlier success, looks back `lookback_days`.
2. **wait_for_scan** waits for each running or pending scan, one mapped deferrable sensor per scan (waiting
   happens in the triggerer; deferred sensors count against the `findings_api` pool). Scans still running from
   earlier runs are waited for again.
3. **refresh_scans** stores the final status of the scans that were waited for.
4. **alert_failed_scans** alerts people when scans ended in `SCAN_STATUS_ERROR`, `SCAN_STATUS_NEVER_FINISHED` or
   `SCAN_STATUS_CANCELLED`: one alert naming the repository, branch, commit and CI job URL of each, sent through
   the channels of `alerts` in `include/pipeline.yaml` (mail, chat). A failed scan is not a failed pipeline: the
   run stays green, unless `alerts.fail_on_alert` is true.
5. **publish_scans** updates the `findings://warehouse/scans` Asset when scans completed, which starts
   `findings_extraction`.

**Params**

- `lookback_days` (integer >= 1, default 30): how far back a search with no earlier success looks (the API keeps
  about 30 days); later runs never search further back than this.
"""

from __future__ import annotations

from airflow.sdk import DAG, Param, TriggerRule
from findings_provider.assets import SCANS
from findings_provider.config import load_pipeline_config
from findings_provider.dag_defaults import conn_ids, dag_settings
from findings_provider.operators.findings import PublishAssetOperator
from findings_provider.operators.scans import RefreshScansOperator, ScanFailureAlertOperator, SearchScansOperator
from findings_provider.sensors.scan import ScanCompletionSensor

CONFIG = load_pipeline_config()
CFG = CONFIG.scan_monitoring
CONN = conn_ids(CONFIG)

with DAG(
    description="Watch scans, wait for running ones, flag failed and never-finished ones",
    tags=["findings", "security", "scans"],
    **dag_settings(CONFIG, "scan_monitoring", schedule=CFG.schedule),
    doc_md=__doc__,
    params={
        "lookback_days": Param(
            CFG.lookback_days,
            type="integer",
            minimum=1,
            maximum=365,
            title="Lookback (days)",
            description="How far back a search with no earlier successful run looks (the API keeps about 30 days).",
        ),
    },
) as dag:
    search = SearchScansOperator(task_id="search_scans", lookback_days="{{ params.lookback_days }}",
                                 overlap_minutes=CFG.overlap_minutes, **CONN)
    wait = ScanCompletionSensor.partial(
        task_id="wait_for_scan",
        findings_conn_id=CONFIG.connections.api_conn_id,
        poke_interval=CFG.sensor_poke_interval,
        timeout=CFG.sensor_timeout,
        fail_on_failure=False,  # the alert task reports failures, with details, in one place
        deferrable=True,  # scans run for minutes to hours: wait in the triggerer, not in a worker slot
    ).expand(scan_id=search.output)
    # Runs even when a wait failed (timed out), so what finished is stored and alerted; pulls tolerate a
    # failed search (nothing to refresh then; the run is failed by the search task anyway).
    refresh = RefreshScansOperator(
        task_id="refresh_scans",
        scan_ids="{{ ti.xcom_pull(task_ids='search_scans') }}",
        failed_ids="{{ ti.xcom_pull(task_ids='search_scans', key='failed_ids') }}",
        newly_completed="{{ ti.xcom_pull(task_ids='search_scans', key='newly_completed') }}",
        trigger_rule=TriggerRule.ALL_DONE,
        **CONN,
    )
    alert = ScanFailureAlertOperator(
        task_id="alert_failed_scans",
        scan_ids=refresh.output["failed_ids"],  # type: ignore[index]  # .output is typed XComArg; it is a PlainXComArg, which has []
        alerts=CONFIG.alerts,
        **CONN,
    )
    publish = PublishAssetOperator(
        task_id="publish_scans",
        changed=refresh.output["newly_completed"],  # type: ignore[index]  # .output is typed XComArg; it is a PlainXComArg, which has []
        what="completed scans",
        asset=SCANS,
        pool="default_pool",
    )
    search >> wait >> refresh >> [alert, publish]
    # Airflow decides a run's state by its last tasks: a failed search must reach them to fail the run
    search >> [alert, publish]
