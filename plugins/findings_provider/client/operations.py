"""Every API operation, once: ``_Operations`` builds a ``Call`` for each (validation happens here, before any
request) and hands it to ``_call``, which the sync and async executors of ``client`` define.

A paginated operation returns one page and says how it pages (``offset_paged``, ``cursor_paged``); the clients'
``pages``, ``items`` and ``raw_pages`` walk any of them (``pagination``). The annotations are the sync client's;
the async client's are generated from them into ``_async_surface`` (``python devtools/client_surface.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar, overload

from findings_provider.client import endpoints as ep
from findings_provider.client import models as m
from findings_provider.client import requests as rq
from findings_provider.client.base import _BaseClient
from findings_provider.client.endpoints import Call
from findings_provider.client.errors import ValidationError
from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from findings_provider.client.pagination import cursor_paged, offset_paged
from findings_provider.client.security import check_download_url

T = TypeVar("T")
U = TypeVar("U")

#: A dependency filter: the request model, or its fields as a dict (validated into it).
DependencyFilterArg = rq.DependencyFilter | dict[str, Any] | None


class _Operations(_BaseClient):
    """Every API operation, defined once. ``_call`` comes from the sync or async subclass.

    The annotations are the sync client's; the async client's (a coroutine of ``T`` for a call) are generated from
    them into ``_async_surface`` (``python devtools/client_surface.py``).
    """

    @overload
    def _call(self, call: Call[T]) -> T: ...

    @overload
    def _call(self, call: Call[T], post: Callable[[T], U]) -> U: ...

    def _call(self, call: Call[Any], post: Callable[[Any], Any] | None = None) -> Any:
        raise NotImplementedError

    # -- deployments (GET /api/v1/deployments) ------------------------------------------------------------------

    def list_deployments(self) -> list[m.Deployment]:
        """List the deployments the token sees."""
        return self._call(Call(ep.DEPLOYMENTS), post=lambda r: r.deployments)

    # -- dependencies (4.1, 4.2): mixed pagination ---------------------------------------------------------------

    @cursor_paged()
    def list_dependencies(
        self,
        *,
        cursor: str | None = None,
        page_size: int | None = None,
        dependency_filter: DependencyFilterArg = None,
    ) -> m.DependenciesPage:
        """One page of the dependency inventory (4.1). ``page_size`` 1-10000 (default 1000)."""
        q = rq.validate(
            rq.DependenciesQuery,
            "list dependencies",
            cursor=cursor,
            dependencyFilter=dependency_filter,
            **({"pageSize": page_size} if page_size is not None else {}),
        )
        return self._call(Call(ep.DEPENDENCIES, json=self._with_deployment_id(q.body())))

    @cursor_paged()
    def list_repositories_with_dependencies(
        self,
        *,
        cursor: str | int | None = None,
        page_size: int | None = None,
        dependency_filter: DependencyFilterArg = None,
    ) -> m.RepositoriesPage:
        """One page of repositories with dependencies (4.2). ``page_size`` 1-100 (default 5)."""
        q = rq.validate(
            rq.RepositoriesQuery,
            "list repositories with dependencies",
            cursor=int(cursor) if isinstance(cursor, str) and cursor.isdigit() else cursor,
            dependencyFilter=dependency_filter,
            **({"pageSize": page_size} if page_size is not None else {}),
        )
        return self._call(Call(ep.DEPENDENCY_REPOSITORIES, json=self._with_deployment_id(q.body())))

    def _with_deployment_id(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.deployment_id:
            body.setdefault("deploymentId", self.deployment_id)
        return body

    # -- scans (4.3, 4.4) ---------------------------------------------------------------------------------------

    @cursor_paged(key=lambda s: s.id)
    def search_scans(self, *, cursor: str | None = None, **filters: Any) -> m.ScansPage:
        """One page of scan search (4.3). Filters: since, statuses, repository_id, branch, is_full_scan, products,
        total_time, limit (1-500, default 100)."""
        q = rq.validate(rq.ScanSearch, "search scans", cursor=cursor, **filters)
        return self._call(Call(ep.SCANS_SEARCH, json=self._with_deployment_id(q.body())))

    def get_scan(self, scan_id: str | int) -> m.ScanDetails:
        """Details of one scan (4.4); ``.status`` is derived (the service sends none here)."""
        return self._call(Call(ep.SCAN_GET, {"scan_id": _digits("scan_id", scan_id)}))

    # -- policies (4.5, 4.6) ------------------------------------------------------------------------------------

    def list_policies(self) -> list[m.Policy]:
        """The deployment's policies (where policy ids are found)."""
        return self._call(Call(ep.POLICIES_LIST), post=lambda r: r.policies)

    @cursor_paged()
    def list_policy_rules(
        self, policy_id: str | int, *, cursor: str | None = None, limit: int | None = None
    ) -> m.PolicyRulesPage:
        """One page of a policy's rules (4.5). ``limit`` up to 2000 (default 500)."""
        pid = _digits("policy_id", policy_id)
        limits = {"limit": limit} if limit is not None else {}
        q = rq.validate(rq.PolicyRulesQuery, "list policy rules", cursor=cursor, **limits)
        return self._call(Call(ep.POLICY_RULES, {"policy_id": pid}, params=list(q.body().items())))

    def update_rule_mode(self, policy_id: str | int, rule_path: str, mode: str) -> m.UpdatePolicyResponse:
        """Set one rule's mode (4.6); returns the updated rule."""
        q = rq.validate(
            rq.UpdatePolicy,
            "update policy",
            deploymentId=self.deployment_id,
            policyId=str(policy_id),
            policyMode=mode,
            rulePath=rule_path,
        )
        return self._call(Call(ep.POLICY_UPDATE, {"policy_id": q.policyId}, json=q.body()))

    # -- findings (4.8) -----------------------------------------------------------------------------------------

    @offset_paged(key=lambda f: f.id, walk_size=FINDINGS_PAGE_SIZE.maximum, raw=True)
    def list_findings(
        self, issue_type: str = "sast", *, page: int = 0, page_size: int = 100, **filters: Any
    ) -> m.FindingsPage:
        """One page of code (``sast``) or supply-chain (``sca``) findings with the filters of 4.8. A walk of them
        asks for the largest page (``FINDINGS_PAGE_SIZE``) unless ``page_size`` is given, and yields each finding
        once (by id): the result set moves while paging."""
        q = rq.validate(
            rq.FindingsQuery,
            "list findings",
            issue_type=issue_type,
            page=page,
            page_size=page_size,
            **filters,
        )
        return self._call(Call(ep.FINDINGS, params=q.params()))

    # -- secrets (4.15): cursor pagination -------------------------------------------------------------------------

    @cursor_paged(key=lambda f: f.id, raw=True)
    def list_secrets(self, *, cursor: str | None = None, limit: int | None = None) -> m.SecretsPage:
        """One page of secrets findings (4.15). A walk of them yields each finding once (by id)."""
        limits = {"limit": limit} if limit is not None else {}
        q = rq.validate(rq.SecretsQuery, "list secrets", cursor=cursor, **limits)
        return self._call(Call(ep.SECRETS, params=list(q.body().items())))

    # -- bulk triage (4.10) and tickets (4.7) ----------------------------------------------------------------------

    def bulk_triage(self, request: rq.TriageRequest | None = None, /, **fields: Any) -> m.TriageResult:
        """Bulk-change the triage state of the selected findings (4.10).

        Pass a ``TriageRequest`` or its fields. A request with neither ``issue_ids`` nor any filter is refused
        unless ``allow_unfiltered=True``.
        """
        req = request or rq.validate(rq.TriageRequest, "bulk triage", **fields)
        return self._call(Call(ep.TRIAGE, json=self._with_slug(req.body())))

    def create_tickets(self, request: rq.TicketRequest | None = None, /, **fields: Any) -> m.TicketResult:
        """Create issue-tracker tickets for the selected findings (4.7). Never retried after an ambiguous failure:
        that raises ``AmbiguousWriteError``."""
        req = request or rq.validate(rq.TicketRequest, "create tickets", **fields)
        body = self._with_slug(req.body_with_tracker_field(self.tracker_project_field))
        return self._call(Call(ep.TICKETS, json=body))

    def _with_slug(self, body: dict[str, Any]) -> dict[str, Any]:
        if self.deployment_slug:
            body.setdefault("deploymentSlug", self.deployment_slug)
        return body

    # -- projects (4.9, 4.12, 4.13, list) ------------------------------------------------------------------------

    @offset_paged(key=lambda p: p.name)
    def list_projects(self, *, page: int = 0, page_size: int = 100) -> m.ProjectsPage:
        """One page of the deployment's projects. A walk of them yields each project once (by name)."""
        q = rq.validate(rq.ProjectsQuery, "list projects", page=page, page_size=page_size)
        return self._call(Call(ep.PROJECTS, params=list(q.body().items())))

    def set_managed_scans(
        self, project_name: str, *, diff_scan: bool | None = None, full_scan: bool | None = None
    ) -> m.Project:
        """Enable or disable managed diff and/or full scans of a project (4.9); returns the project."""
        q = rq.validate(
            rq.ManagedScanUpdate,
            "toggle managed scans",
            deploymentSlug=self.deployment_slug,
            projectName=project_name,
            diff_scan=None if diff_scan is None else {"enabled": diff_scan},
            full_scan=None if full_scan is None else {"enabled": full_scan},
        )
        call = Call(ep.MANAGED_SCAN, {"project_name": q.projectName}, json=q.body())
        return self._call(call, post=lambda r: r.project)

    def add_project_tags(self, project_name: str, tags: Iterable[str]) -> m.Project:
        """Add tags to a project (4.12); returns the project."""
        q = rq.validate(rq.Tags, "add project tags", project_name=project_name, tags=list(tags))
        call = Call(ep.TAGS_ADD, {"project_name": q.project_name}, json=q.add_body(self.tags_body))
        return self._call(call, post=lambda r: r.project)

    def remove_project_tags(self, project_name: str, tags: Iterable[str]) -> m.Project:
        """Remove tags from a project (4.13); returns the project. The tags go as repeated ``tags`` query keys and
        the DELETE has no body, whatever ``tags_body`` says (that shapes adding tags only)."""
        q = rq.validate(rq.Tags, "remove project tags", project_name=project_name, tags=list(tags))
        call = Call(ep.TAGS_REMOVE, {"project_name": q.project_name}, params=q.remove_params())
        return self._call(call, post=lambda r: r.project)

    def get_project(self, project_name: str) -> m.Project:
        """One project (``GET .../projects/{projectName}``, api-notes "Projects"); ``NotFoundError`` if none."""
        q = rq.validate(rq.ProjectRef, "get project", project_name=project_name)
        return self._call(Call(ep.PROJECT_GET, {"project_name": q.project_name}), post=lambda r: r.project)

    def update_project(
        self,
        project_name: str,
        *,
        tags: Iterable[str] | None = None,
        primary_branch: str | None = None,
        diff_scan: bool | None = None,
        full_scan: bool | None = None,
    ) -> m.Project:
        """Change a project (``PATCH .../projects/{projectName}``): its tags (replaced as a whole; ``[]`` clears
        them), its primary branch and/or its managed diff and full scans; returns the project. A write: never sent
        twice after an ambiguous failure (``AmbiguousWriteError``)."""
        managed = {
            name: {"enabled": value}
            for name, value in (("diff_scan", diff_scan), ("full_scan", full_scan))
            if value is not None
        }
        q = rq.validate(
            rq.ProjectUpdate,
            "update project",
            project_name=project_name,
            tags=None if tags is None else list(tags),
            primary_branch=primary_branch,
            managed_scan_config=managed or None,
        )
        call = Call(ep.PROJECT_UPDATE, {"project_name": q.project_name}, json=q.body())
        return self._call(call, post=lambda r: r.project)

    def delete_project(self, project_name: str) -> m.ProjectDeleted:
        """Delete a project (``DELETE .../projects/{projectName}``); returns the name the service deleted. A write:
        never sent twice after an ambiguous failure (a second DELETE would answer 404)."""
        q = rq.validate(rq.ProjectRef, "delete project", project_name=project_name)
        return self._call(Call(ep.PROJECT_DELETE, {"project_name": q.project_name}))

    # -- lockfiles of a repository: mixed pagination ----------------------------------------------------------------

    @cursor_paged()
    def list_lockfiles(
        self, repository_id: str | int, *, cursor: str | int | None = None, page_size: int | None = None
    ) -> m.LockfilesPage:
        """One page of a repository's lockfiles (path and number of dependencies each)."""
        q = rq.validate(
            rq.LockfilesQuery,
            "list lockfiles",
            repository_id=repository_id,
            cursor=cursor,
            **({"pageSize": page_size} if page_size is not None else {}),
        )
        # the supply-chain endpoints need a JSON body: {} when nothing is set
        return self._call(Call(ep.LOCKFILES, {"repository_id": q.repository_id}, json=q.body()))

    # -- SBOM export: start, poll, download ------------------------------------------------------------------------

    def start_sbom_export(
        self,
        repository_id: str | int,
        *,
        cyclonedx_version: str = "1.6",
        ref: str | None = None,
        metadata_component_type: str | None = None,
        metadata_supplier: dict[str, Any] | None = None,
    ) -> m.SbomExportTask:
        """Start an SBOM export job of a repository (``POST .../sbom/export``); returns its ``taskToken``.

        ``cyclonedx_version``: 1.4, 1.5, 1.6 or 1.7 (or the full ``SBOM_CYCLONE_DX_VERSION_V1_6``); ``ref``: the
        branch (the primary one when left out); ``metadata_component_type``: ``application``, ``library``, ... (or
        the full ``SBOM_METADATA_COMPONENT_TYPE_...`` value); ``metadata_supplier``: ``{name, url, contact: {name,
        email, phone}}``. A write: never sent twice after an ambiguous failure.
        """
        q = rq.validate(
            rq.SbomExportRequest,
            "start SBOM export",
            repositoryId=repository_id,
            ref=ref,
            formatVersion={"cyclonedxVersion": cyclonedx_version},
            metadataComponentType=metadata_component_type,
            metadataSupplier=metadata_supplier,
        )
        return self._call(Call(ep.SBOM_EXPORT, json=q.body()))

    def get_sbom_export(self, task_token: str) -> m.SbomExportState:
        """The state of an SBOM export job (``status``, and ``downloadUrl`` once completed). The service rate-limits
        exports: poll with a growing interval, not in a tight loop."""
        q = rq.validate(rq.SbomTaskRef, "get SBOM export", task_token=task_token)
        return self._call(Call(ep.SBOM_EXPORT_STATUS, {"task_token": q.task_token}))

    def download_sbom(self, download_url: str, *, max_bytes: int | None = None) -> m.SbomDocument:
        """Fetch the CycloneDX document of a completed export from its ``downloadUrl``.

        A plain HTTP GET that never sends the API token (the link may be on another host); https only, unless the
        host is loopback or the connection allows insecure http (each redirect is checked the same way). The body
        is capped at ``max_bytes`` (default: ``max_response_bytes``): beyond it ``ResponseTooLargeError``. A 4xx
        (an expired link) is ``DownloadLinkError``; 5xx and connection failures are retried like any read.
        """
        url = check_download_url(download_url, self.allow_insecure_http)
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1):
            raise ValidationError(
                f"download SBOM: field 'max_bytes' = {max_bytes!r}: expected a positive number of bytes",
                field="max_bytes",
            )
        call = Call(ep.SBOM_DOWNLOAD, {"url": url})
        call.max_bytes = max_bytes
        return self._call(call)

    # -- ticket links ------------------------------------------------------------------------------------------------

    def link_ticket(self, ticket_url: str, issue_ids: Iterable[int | str]) -> m.TicketLinkResult:
        """Link an existing tracker ticket to findings (``POST .../tickets/link``); returns the ticket, the ids now
        linked and those whose earlier link it replaced. A write: never sent twice after an ambiguous failure."""
        q = rq.validate(rq.TicketLink, "link ticket", ticket_url=ticket_url, issue_ids=list(issue_ids))
        return self._call(Call(ep.TICKET_LINK, json=q.body()))

    def unlink_tickets(self, issue_ids: Iterable[int | str]) -> m.TicketUnlinkResult:
        """Remove the ticket links of findings (``POST .../tickets/unlink``); returns the ids unlinked. A write."""
        q = rq.validate(rq.TicketUnlink, "unlink tickets", issue_ids=list(issue_ids))
        return self._call(Call(ep.TICKET_UNLINK, json=q.body()))

    def delete_ticket_link(self, external_ticket_id: str | int) -> m.TicketLinkDeleted:
        """Delete a ticket link (``DELETE .../ticketing/v2/tickets/{externalTicketId}``); returns the ids that were
        linked to it. A write."""
        q = rq.validate(rq.TicketRef, "delete ticket link", external_ticket_id=external_ticket_id)
        return self._call(Call(ep.TICKET_LINK_DELETE, {"external_ticket_id": q.external_ticket_id}))

    # -- liveness ----------------------------------------------------------------------------------------------------

    def ping(self) -> m.PingResponse:
        """``GET /api/v1/ping``: the service answers (``{}``); no deployment in the path."""
        return self._call(Call(ep.PING))


def _digits(name: str, value: str | int) -> str:
    text = str(value)
    if not (text.isascii() and text.isdigit()):  # str.isdigit() alone accepts "¹" and other Unicode digits
        raise ValidationError(f"{name} {value!r} must be a numeric id (digits only)", field=name)
    return text

