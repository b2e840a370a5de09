"""What the dashboard reads from Airflow's own metadata database on the API server: the approvals waiting (the
human-in-the-loop requests of the pipeline's DAGs) and the runs of the DAGs that write to the service."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy import select

from findings_provider.names import APPROVAL_DAGS, PIPELINE_DAGS

log = logging.getLogger(__name__)


def pending_approvals() -> list[dict[str, Any]] | None:
    """The approvals waiting (requests of the pipeline's DAGs not answered yet), oldest first; None where
    Airflow's database cannot be read (outside Airflow)."""
    try:
        from airflow.models.hitl import HITLDetail
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session

        with create_session() as session:
            rows = session.execute(
                select(TaskInstance.dag_id, TaskInstance.run_id, TaskInstance.task_id, TaskInstance.map_index,
                       HITLDetail.subject, HITLDetail.created_at)
                .join(TaskInstance, TaskInstance.id == HITLDetail.ti_id)
                .where(HITLDetail.responded_at.is_(None), TaskInstance.dag_id.in_(PIPELINE_DAGS))
                .order_by(HITLDetail.created_at)
            ).all()
    except Exception:  # not in Airflow, or its database is unreachable: say so rather than fail the page
        log.warning("pending approvals: Airflow's metadata database cannot be read", exc_info=True)
        return None
    return [{**dict(r._mapping), "created_at": r.created_at.isoformat(timespec="seconds") if r.created_at else None}
            for r in rows]


#: Runs the activity page lists (the newest): read from Airflow and shown, one number for both.
RUNS_LISTED = 50


def writing_runs(dry_run_defaults: Mapping[str, bool], limit: int = RUNS_LISTED,
                 dag_id: str | None = None) -> list[dict[str, Any]] | None:
    """The newest runs of the DAGs that write (``APPROVAL_DAGS``), or of ``dag_id``: id, state, start and whether
    it was a dry run (its ``dry_run`` param as triggered, else the DAG's default from ``dry_run_defaults``); None
    where Airflow's database cannot be read."""
    dags = (dag_id,) if dag_id else APPROVAL_DAGS
    try:
        from airflow.models.dagrun import DagRun
        from airflow.utils.session import create_session

        with create_session() as session:
            rows = session.execute(
                select(DagRun.dag_id, DagRun.run_id, DagRun.state, DagRun.start_date, DagRun.run_after, DagRun.conf)
                .where(DagRun.dag_id.in_(dags)).order_by(DagRun.run_after.desc()).limit(limit)
            ).all()
    except Exception:
        log.warning("runs: Airflow's metadata database cannot be read", exc_info=True)
        return None
    out = []
    for r in rows:
        conf = r.conf if isinstance(r.conf, dict) else {}
        dry = conf.get("dry_run", dry_run_defaults.get(r.dag_id, False))
        started = r.start_date or r.run_after
        out.append({"dag_id": r.dag_id, "run_id": r.run_id, "state": str(r.state) if r.state else None,
                    "start_date": started.isoformat(timespec="seconds") if started else None,
                    "dry_run": dry is True or str(dry).lower() == "true"})
    return out
