"""Developer tools, one job per module: the stack launcher (``stack.py``: ``Stack``) with its environment
(``environment.py``) and process handling (``processes.py``) and its command line (``cli.py``); the demo
(``demo.py``); the Airflow REST client (``airflow_api.py``); the local PostgreSQL and Redis (``services.py``); a
warehouse as the release before versioning left it, for the tests and the bench (``warehouse.py``); the demo's
mail catcher (``mail_catcher.py``)."""
