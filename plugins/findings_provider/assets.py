"""The Airflow Assets that chain the pipeline stages (each stage publishes one when it wrote new data)."""

from __future__ import annotations

from airflow.sdk import Asset

SCANS = Asset("findings://warehouse/scans", group="findings")
FINDINGS = Asset("findings://warehouse/findings", group="findings")
TRIAGE = Asset("findings://warehouse/triage_actions", group="findings")
TICKETS = Asset("findings://warehouse/ticket_actions", group="findings")
POLICY_RULES = Asset("findings://warehouse/policy_rules", group="findings")
DEPENDENCIES = Asset("findings://warehouse/dependencies", group="findings")
