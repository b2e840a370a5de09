"""The pipeline's logic as plain functions over a ``FindingsClient`` and a ``Warehouse`` (no Airflow imports).

``scans`` (search, store, classify, alert text), ``extraction`` (incremental findings pulls with a watermark),
``selection`` (policy selections from the warehouse), ``triage`` (plan and execute bulk triage) and ``tickets``
(a run of grouped ticket creation that never tickets a finding twice: ``ticket_plan`` plans it, ``ticket_send``
sends the requests, ``ticket_outcomes`` records and reconciles what became of them). Operators are thin wrappers of
these.
"""
