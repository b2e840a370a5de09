"""The names the pipeline is known by: its DAG ids, its pool and its owner. Plain constants, imported by the DAG
building (``dag_defaults``), the notifiers, the dashboard, the launcher and the tests; this module imports nothing."""

from __future__ import annotations

#: The findings DAGs, in pipeline order: scans watched, findings pulled, triaged, ticketed.
FINDINGS_DAGS = ("scan_monitoring", "findings_extraction", "autotriage_triage", "ticket_creation")
#: The governance DAGs: rule policies tuned, project settings kept as code, the dependency inventory.
GOVERNANCE_DAGS = ("policy_tuning", "project_settings", "dependency_inventory")
#: The seven pipeline DAG ids (the interfaces' names; one file each in ``dags/``), in pipeline order: the one list
#: the stack launcher, the dashboard and the tests use.
PIPELINE_DAGS = FINDINGS_DAGS + GOVERNANCE_DAGS
#: The pipeline DAGs whose writes may wait for a person's approval.
APPROVAL_DAGS = ("autotriage_triage", "ticket_creation", "policy_tuning")
API_POOL = "findings_api"
OWNER = "appsec"
