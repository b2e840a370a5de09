"""The findings dashboard inside the Airflow UI: an Airflow plugin (``plugin.FindingsDashboardPlugin``, declared in
the provider info) that mounts a FastAPI app (``app.create_app``) on the API server, behind Airflow's own login,
with an entry in Airflow's navigation. Its pages (``pages``) are built from the warehouse: nothing on one worker's
disk. See docs/dashboard.md.
"""
