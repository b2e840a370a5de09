"""Logic of the governance pipelines (policy tuning, project settings, dependency inventory).

Pure Python over the client and the warehouse, no Airflow: the operators in ``findings_provider.operators``
(``policies``, ``projects``, ``dependencies``) wrap these functions. pandas and matplotlib are imported inside
the functions that need them, so importing this package stays cheap.
"""
