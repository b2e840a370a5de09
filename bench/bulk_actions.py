"""Bulk actions through the product's pipeline logic against the emulator: triage and ticket creation.

The warehouse is emptied and loaded by the product's extraction first (untimed). Then, each timed from planning
to the last warehouse write:

- triage: the default triage policy of ``include/pipeline.yaml`` (open code findings with the autotriage verdict
  ``false_positive``) is planned by ``pipeline.triage.plan_triage``, cut to its first ``--triage`` findings
  (chunks of 3000, as the planner cuts them), recorded by ``record_plan`` and executed by ``execute_plan``: the
  findings of each chunk re-read from the service right before its own request (the fresh state before the
  write), one bulk-triage request per chunk, then the triaged rows (and their same-fingerprint twins) are
  refreshed in the warehouse and read back from the service (``freshness.settle``: the warehouse equals the
  service for what was written);
- tickets: ``pipeline.ticket_plan.plan_policies`` with a benchmark policy (every open code finding, so that there
  are enough (repository, rule) groups), cut to the first ``--groups`` groups by ``fresh_batches`` (batches of 20
  groups), sent by ``create_tickets``, each batch's findings re-read right before its own request; outcomes
  recorded per finding, then the findings the requests named read back (``settle_batches``).

Requests are counted from the emulator's request log and compared with ceil(N/3000) and ceil(groups/20); the
re-reads before the writes (findings requests) with their budget, ceil(candidates/3000) + 1 per request's re-read
(``reread_budget``; ``reread_per_request``: re-read requests per write request), and with what one re-read of the whole
selection would cost, ceil(N/3000) + 1 (``reread_policy_budget``: ``reread_extra`` is the difference); the reads
after it with ceil(written/3000) + 1. ``window_p50_s``, ``window_p99_s``, ``window_max_s``: seconds from each
request's re-read to the request.

    python bench/bulk_actions.py --base-url http://127.0.0.1:8900 --token T --slug acme --deployment-id 1 \
        --database-url sqlite:////tmp/bulk.db --triage 10000 --groups 500 --out bulk.json
"""

from __future__ import annotations

import argparse
import math
import time
from typing import Any

from common import emulator_arguments, peak_rss_mb, reset_database, write_json
from extract_product import count_requests, emulator_requests
from pulled import ISSUE_TYPES


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    emulator_arguments(parser)
    parser.add_argument("--triage", type=int, default=10_000, help="findings to triage")
    parser.add_argument("--groups", type=int, default=500, help="ticket groups to create")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    import httpx
    from findings_provider.client import FindingsClient
    from findings_provider.client.limits import FINDINGS_PAGE_SIZE, TICKETS_LIMIT, TRIAGE_LIMIT
    from findings_provider.config import TicketPolicy, load_pipeline_config
    from findings_provider.pipeline import extraction, ticket_plan, ticket_send, tickets, triage
    from findings_provider.warehouse import Warehouse, make_engine

    reset_database(args.database_url)
    warehouse = Warehouse(make_engine(args.database_url))
    warehouse.create_all()
    admin = httpx.Client(base_url=args.base_url, timeout=60.0)
    out: dict[str, Any] = {}
    with FindingsClient(args.base_url, args.token, deployment_id=args.deployment_id,
                        deployment_slug=args.slug) as client:
        loaded = extraction.run_extraction(client, warehouse, ISSUE_TYPES, full_refresh=True)
        out["warehouse_findings"] = loaded["findings"]

        # --- triage -----------------------------------------------------------------------------------------
        policy = load_pipeline_config().autotriage_triage.policies[0]
        admin.delete("/_emulator/requests").raise_for_status()
        started = time.perf_counter()
        (planned,) = triage.plan_triage(warehouse, [policy])
        selected = planned.selected[: args.triage]
        plan = triage.PolicyPlan(policy, selected, triage.chunked([f.id for f in selected], TRIAGE_LIMIT.maximum))
        action_ids = triage.record_plan(warehouse, [plan], dry_run=False, dag_id="bench", run_id="bench-triage")
        counts = triage.execute_plan(client, warehouse, action_ids, [policy])
        seconds = time.perf_counter() - started
        requests = count_requests(emulator_requests(admin))
        out["triage"] = {
            "policy": policy.name, "eligible": len(planned.selected),
            "selected": len(selected), "seconds": seconds, "findings_per_s": len(selected) / seconds,
            "requests": requests["by_operation"].get("triage", 0),
            "expected_requests": math.ceil(len(selected) / TRIAGE_LIMIT.maximum),
            "reread_requests": counts["reread_requests"],
            "reread_budget": len(plan.chunks) * (math.ceil(len(selected) / FINDINGS_PAGE_SIZE.maximum) + 1),
            "reread_policy_budget": math.ceil(len(selected) / FINDINGS_PAGE_SIZE.maximum) + 1,
            "reread_extra": counts["reread_requests"] - (math.ceil(len(selected) / FINDINGS_PAGE_SIZE.maximum) + 1),
            "reread_per_request": counts["reread_requests"] / max(1, len(plan.chunks)),
            "dropped": counts["dropped"],
            "settle_requests": counts["settle_requests"], "settled": counts["settled"],
            "settle_named": counts["settle_named"],
            "settle_budget": math.ceil(counts["settle_named"] / FINDINGS_PAGE_SIZE.maximum) + 1,
            **{k: v for k, v in counts.items() if k.startswith("window_")},
            "findings_requests": requests["by_operation"].get("findings", 0),
            "triaged_by_service": counts["triaged"], "warehouse_rows_refreshed": counts["refreshed"],
        }

        # --- tickets ----------------------------------------------------------------------------------------
        ticket_policy = TicketPolicy(name="bench-open-code-findings", issue_type="sast",
                                     select={"status": ["open"]})
        admin.delete("/_emulator/requests").raise_for_status()
        started = time.perf_counter()
        (planned_tickets,) = ticket_plan.plan_policies(warehouse, [ticket_policy])
        batches, rereads = tickets.fresh_batches(client, warehouse, [planned_tickets],
                                                 allowed={ticket_policy.name: args.groups}, run_id="bench-tickets")
        tally = ticket_send.create_tickets(client, warehouse, batches, run_id="bench-tickets", reread=rereads)
        reread, chosen = rereads.stats, rereads.batches
        groups = sum(len(b.groups) for b in chosen)
        settled: dict[str, Any] = {}
        tickets.settle_batches(client, warehouse, chosen, {ticket_policy.name: ticket_policy.selector}, settled)
        seconds = time.perf_counter() - started
        requests = count_requests(emulator_requests(admin))
        out["tickets"] = {
            "policy": ticket_policy.name, "groups": groups, "findings": sum(len(b.ids) for b in chosen),
            "seconds": seconds, "groups_per_s": groups / seconds,
            "requests": requests["by_operation"].get("tickets", 0),
            "expected_requests": math.ceil(groups / TICKETS_LIMIT.maximum),
            "candidates": len(planned_tickets.selected), "reread_requests": reread["reread_requests"],
            "reread_budget": len(batches) * (math.ceil(len(planned_tickets.selected) / FINDINGS_PAGE_SIZE.maximum) + 1),
            "reread_policy_budget": math.ceil(sum(len(b.ids) for b in batches) / FINDINGS_PAGE_SIZE.maximum) + 1,
            "reread_extra": reread["reread_requests"]
            - (math.ceil(sum(len(b.ids) for b in batches) / FINDINGS_PAGE_SIZE.maximum) + 1),
            "reread_per_request": reread["reread_requests"] / max(1, len(batches)),
            "settle_requests": settled["settle_requests"], "settled": settled["settled"],
            "settle_named": settled["settle_named"],
            "settle_budget": math.ceil(settled["settle_named"] / FINDINGS_PAGE_SIZE.maximum) + 1,
            "findings_requests": requests["by_operation"].get("findings", 0),
            "dropped": reread["dropped"],
            **{k: v for k, v in tally.as_dict().items() if k.startswith("window_")},
            "tickets_created": tally.tickets, "succeeded": tally.succeeded, "failed": tally.failed,
            "skipped": tally.skipped,
        }
    admin.close()
    warehouse.engine.dispose()
    reset_database(args.database_url)
    out["peak_rss_mb"] = peak_rss_mb()
    write_json(args.out, out)


if __name__ == "__main__":
    main()
