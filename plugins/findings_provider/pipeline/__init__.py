"""The pipeline's logic as plain functions over a ``FindingsClient`` and a ``Warehouse`` (no Airflow imports).

``scans`` (search, store, classify, alert text), ``extraction`` (incremental findings pulls with a watermark),
``selection`` (policy selections from the warehouse), ``triage`` (plan and execute bulk triage) and ``tickets``
(plan and create grouped tickets without ever ticketing a finding twice). Operators are thin wrappers of these.
"""
