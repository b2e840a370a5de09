"""The dashboard's FastAPI app, mounted by the plugin on Airflow's API server under ``links.URL_PREFIX``.

Every route depends on Airflow's own authentication (the UI's session cookie or a bearer token, resolved by the
API server's auth manager) and on the user being allowed to see the Airflow website: without a login a request
gets 401 and no data. Pages are built in a worker thread (the database calls block) from the warehouse the
pipeline writes (``connections.warehouse_conn_id`` of ``include/pipeline.yaml``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse

from findings_provider.config import PipelineConfig, load_pipeline_config
from findings_provider.dashboard import pages
from findings_provider.warehouse import Warehouse


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


def create_app(sources: Callable[[], tuple[Warehouse, PipelineConfig]] = default_sources,
               auth: Callable[..., Any] | None = None,
               approvals: Callable[[], Any] = pages.pending_approvals) -> FastAPI:
    """The app; ``sources``, ``auth`` (default ``authorize()``) and ``approvals`` (Airflow's waiting
    human-in-the-loop requests) are replaceable for tests."""
    app = FastAPI(title="Findings dashboard", docs_url=None, redoc_url=None, openapi_url=None)
    guard = [Depends(auth or authorize())]

    async def page(build: Callable[[Warehouse, PipelineConfig], str]) -> HTMLResponse:
        warehouse, config = sources()
        return HTMLResponse(await run_in_threadpool(build, warehouse, config))

    @app.get("/", dependencies=guard, response_class=HTMLResponse)
    async def overview() -> HTMLResponse:
        return await page(lambda w, c: pages.overview(w, approvals=approvals()))

    @app.get("/findings", dependencies=guard, response_class=HTMLResponse)
    async def findings(request: Request) -> HTMLResponse:
        params = dict(request.query_params)
        return await page(lambda w, c: pages.findings_page(w, c, params))

    @app.get("/scans", dependencies=guard, response_class=HTMLResponse)
    async def scans() -> HTMLResponse:
        return await page(lambda w, c: pages.scans_page(w))

    @app.get("/activity", dependencies=guard, response_class=HTMLResponse)
    async def activity(run_id: str = "") -> HTMLResponse:
        return await page(lambda w, c: pages.activity_page(w, run_id))

    @app.get("/policies", dependencies=guard, response_class=HTMLResponse)
    async def policies(run_id: str = "") -> HTMLResponse:
        return await page(lambda w, c: pages.policies_page(w, run_id))

    @app.get("/inventory", dependencies=guard, response_class=HTMLResponse)
    async def inventory() -> HTMLResponse:
        return await page(lambda w, c: pages.inventory_page(w))

    @app.get("/reports/{kind}", dependencies=guard, response_class=HTMLResponse)
    async def report(kind: str, run_id: str | None = None) -> HTMLResponse:
        warehouse, _ = sources()
        body = await run_in_threadpool(pages.stored_report, warehouse, kind, run_id or None)
        if body is None:
            raise HTTPException(status_code=404, detail=f"no stored report {kind!r}"
                                + (f" of run {run_id!r}" if run_id else ""))
        return HTMLResponse(body)

    return app
