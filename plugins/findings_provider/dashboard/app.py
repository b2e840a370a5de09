"""The dashboard's FastAPI app, mounted by the plugin on Airflow's API server under ``links.URL_PREFIX``: the
JSON the dashboard's React app reads (``/api/...``), the CSV export, the stored reports, and the app's bundle.

Every route but the bundle depends on Airflow's own authentication (the UI's session cookie or a bearer token,
resolved by the API server's auth manager) and on the user being allowed to see the Airflow website: without a
login a request gets 401 and no data. Views are built in a worker thread (the database calls block) from the
warehouse the pipeline writes (``connections.warehouse_conn_id`` of the pipeline configuration). Bad query values
get 422 with a message naming the field, the value and what is allowed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from importlib.resources import files
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from findings_provider.config import PipelineConfig, load_pipeline_config
from findings_provider.dashboard import airflow_state, views
from findings_provider.dashboard.findings_list import ListSettings, findings_csv, findings_page
from findings_provider.names import APPROVAL_DAGS
from findings_provider.programme import FindingFilter
from findings_provider.warehouse import Warehouse

#: What a stored report is shown with when Airflow's UI is in dark mode (``?theme=dark``): the report's own
#: light styles overridden, its PNG charts kept on white.
DARK_REPORT_STYLE = (
    "<style>body{background:#18181b;color:#e4e4e7}th{background:#27272a}td,th{border-color:#3f3f46}"
    "a{color:#93c5fd}img{background:#fff;padding:4px;border-radius:4px}</style>"
)
#: The React app's bundle (an ES module using Airflow's React and Chakra UI), served at ``/static/<name>``.
BUNDLE = "findings-dashboard.js"


def authorize() -> Callable[..., Any]:
    """Airflow's dependency: a logged-in user allowed to see the website (``AccessView.WEBSITE``)."""
    from airflow.api_fastapi.auth.managers.models.resource_details import AccessView
    from airflow.api_fastapi.core_api.security import requires_access_view

    return requires_access_view(AccessView.WEBSITE)


@lru_cache(maxsize=4)
def _warehouse(conn_id: str) -> Warehouse:
    from findings_provider.hooks.warehouse import FindingsWarehouseHook

    return FindingsWarehouseHook(warehouse_conn_id=conn_id).get_warehouse()


def default_sources() -> tuple[Warehouse, PipelineConfig]:
    """The warehouse and configuration the pipeline uses (the configuration is re-read when its file changes)."""
    config = load_pipeline_config()
    return _warehouse(config.connections.warehouse_conn_id), config


@dataclass(frozen=True)
class AirflowState:
    """Where the app reads Airflow's own state; replaceable for tests."""

    approvals: Callable[[], Any] = airflow_state.pending_approvals
    runs: Callable[..., Any] = airflow_state.writing_runs


def _settings(config: PipelineConfig) -> ListSettings:
    return ListSettings(targets=config.sla.fix_days.targets(), finding_url=config.dashboard.finding_url,
                        page_size=config.dashboard.page_size)


def _dry_run_defaults(config: PipelineConfig) -> dict[str, bool]:
    return {dag_id: getattr(config, dag_id).dry_run for dag_id in APPROVAL_DAGS}


def _int(params: Any, name: str, default: int | None) -> int | None:
    value = params.get(name)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name} = {value!r}: expected a whole number") from None


def create_app(sources: Callable[[], tuple[Warehouse, PipelineConfig]] = default_sources,
               auth: Callable[..., Any] | None = None, airflow: AirflowState | None = None,
               clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> FastAPI:
    """The app; ``sources``, ``auth`` (default ``authorize()``), ``airflow`` (Airflow's approvals and runs) and
    ``clock`` are replaceable for tests."""
    app = FastAPI(title="Findings dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    guard = [Depends(auth or authorize())]
    state = airflow or AirflowState()

    @app.exception_handler(ValueError)
    async def bad_value(request: Request, error: ValueError) -> JSONResponse:
        return JSONResponse({"detail": str(error)}, status_code=422)

    async def view(build: Callable[[Warehouse, PipelineConfig, datetime], Any]) -> Any:
        warehouse, config = sources()
        return await run_in_threadpool(build, warehouse, config, clock())

    def listing(request: Request) -> dict[str, Any]:
        params = request.query_params
        return {"selection": FindingFilter.from_query(params), "sort": params.get("sort") or "severity",
                "descending": params.get("order") == "desc"}

    @app.get("/api/overview", dependencies=guard)
    async def overview(branches: str = "") -> Any:
        return await view(lambda w, c, now: views.overview(w, c.sla.fix_days.targets(), now,
                                                           approvals=state.approvals(), branches=branches))

    @app.get("/api/widget", dependencies=guard)
    async def widget() -> Any:
        return await view(lambda w, c, now: views.widget(w, c.sla.fix_days.targets(), now,
                                                         approvals=state.approvals()))

    @app.get("/api/findings", dependencies=guard)
    async def findings(request: Request) -> Any:
        args, params = listing(request), request.query_params
        offset, limit = _int(params, "offset", 0), _int(params, "limit", None)
        return await view(lambda w, c, now: findings_page(w, args["selection"], _settings(c), now,
                                                          sort=args["sort"], descending=args["descending"],
                                                          offset=offset or 0, limit=limit))

    @app.get("/api/findings.csv", dependencies=guard)
    async def findings_export(request: Request) -> StreamingResponse:
        args = listing(request)
        warehouse, config = sources()
        chunks = findings_csv(warehouse, args["selection"], _settings(config), clock(), sort=args["sort"],
                              descending=args["descending"])
        name = "findings-" + "-".join(f"{k}-{v}" for k, v in args["selection"].query().items())[:80]
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)
        return StreamingResponse(chunks, media_type="text/csv; charset=utf-8",
                                 headers={"Content-Disposition": f'attachment; filename="{safe}.csv"'})

    @app.get("/api/repositories", dependencies=guard)
    async def repositories(branches: str = "") -> Any:
        return await view(lambda w, c, now: views.repositories(w, c.sla.fix_days.targets(), now, branches))

    @app.get("/api/repository", dependencies=guard)
    async def repository(name: str, branches: str = "") -> Any:
        return await view(lambda w, c, now: views.repository(w, name, c.sla.fix_days.targets(), now, branches))

    @app.get("/api/scans", dependencies=guard)
    async def scans(status: str = "") -> Any:
        return await view(lambda w, c, now: views.scan_list(w, status, now=now))

    @app.get("/api/activity", dependencies=guard)
    async def activity(dag_id: str = "") -> Any:
        return await view(lambda w, c, now: views.activity(
            w, state.runs(_dry_run_defaults(c), dag_id=dag_id or None), dag_id=dag_id or None))

    @app.get("/api/run", dependencies=guard)
    async def run(run_id: str, dag_id: str = "") -> Any:
        return await view(lambda w, c, now: views.run_detail(w, run_id, dag_id or None))

    @app.get("/api/policies", dependencies=guard)
    async def policies() -> Any:
        return await view(lambda w, c, now: views.policies(w))

    @app.get("/api/inventory", dependencies=guard)
    async def inventory() -> Any:
        return await view(lambda w, c, now: views.inventory(w))

    @app.get("/api/reports", dependencies=guard)
    async def reports() -> Any:
        return await view(lambda w, c, now: views.report_list(w))

    @app.get("/reports/{kind}", dependencies=guard, response_class=HTMLResponse)
    async def report(kind: str, run_id: str | None = None, theme: str = "") -> HTMLResponse:
        warehouse, _ = sources()
        stored = await run_in_threadpool(warehouse.latest_report, kind, run_id=run_id or None)
        if stored is None:
            raise HTTPException(status_code=404, detail=f"no stored report {kind!r}"
                                + (f" of run {run_id!r}" if run_id else ""))
        page = str(stored.html)
        if theme == "dark":
            page = page.replace("</head>", DARK_REPORT_STYLE + "</head>", 1)
        return HTMLResponse(page)

    @app.get(f"/static/{BUNDLE}")
    async def bundle() -> Response:
        # the app's code only (no data): Airflow's UI imports it before it renders the plugin's page
        text = files("findings_provider.dashboard").joinpath("static", BUNDLE).read_text(encoding="utf-8")
        return Response(text, media_type="text/javascript", headers={"Cache-Control": "no-cache"})

    return app
