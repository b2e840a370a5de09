"""A findings server that answers with prebuilt page bytes, so that serving costs next to no CPU.

The emulator builds each page per request (a SQLite query, joining the stored JSON): on two cores its CPU competes
with the client's. This server takes every page once, up front, from the emulator (the same seed and N, so the
same JSON bytes the emulator serves), keeps the bodies in memory and then answers ``GET
/api/v1/deployments/{slug}/findings`` with them (reference 4.8 and 4.14: offset pagination, ``page`` from 0,
``page_size`` 100-3000, default 100; a page past the end is empty). Pages of the prebuilt size (3000, what the
product asks for) are sent as they are; another size is assembled once from the same findings and cached. A
filter is refused (400): the server holds the unfiltered listing only. Requests need ``Authorization: Bearer
<token>``.

For the benchmark's child scripts it also answers the emulator's admin routes they use: ``GET
/_emulator/health`` (deployment id and slug) and ``GET`` / ``DELETE /_emulator/requests`` (the request log, in the
emulator's format), so ``extract_product.py`` runs against it unchanged.

    python bench/page_server.py --findings 100000 --port 8901 --token T          # its own emulator, stopped after
    python bench/page_server.py --from-url http://127.0.0.1:8900 --token T --port 8901   # a running emulator's data

``PageServerProcess`` runs it as a subprocess (``with PageServerProcess(findings=...) as server``).
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

import msgspec
import orjson
from findings_emulator.testing import EmulatorAdmin, stop_process_group
from findings_provider.client.limits import FINDINGS_PAGE_SIZE
from pulled import ISSUE_TYPES

#: The page size prebuilt: the API's maximum, what the product asks for.
PAGE_SIZE = FINDINGS_PAGE_SIZE.maximum
ALLOWED_PARAMETERS = {"issue_type", "page", "page_size"}
BENCH_DIR = Path(__file__).resolve().parent


class _Items(msgspec.Struct):
    findings: list[msgspec.Raw] = []


class _Page(msgspec.Struct):
    sastFindings: _Items = msgspec.field(default_factory=_Items)
    scaFindings: _Items = msgspec.field(default_factory=_Items)


def page_body(issue_type: str, items: list[Any]) -> bytes:
    """The reference dialect's response body around serialised findings (as the emulator writes it)."""
    joined = b",".join(items)
    if issue_type == "sca":
        return b'{"sastFindings":{"findings":[]},"scaFindings":{"findings":[' + joined + b"]}}"
    return b'{"sastFindings":{"findings":[' + joined + b']},"scaFindings":{"findings":[]}}'


class Pages:
    """Every page of every issue type, as bytes, plus the findings sliced out of them (for other page sizes)."""

    def __init__(self, bodies: dict[str, list[bytes]]) -> None:
        self.bodies = bodies  # issue type -> bodies of pages 0.. of PAGE_SIZE (the last one short or empty)
        decode = msgspec.json.Decoder(_Page).decode
        self.items: dict[str, list[msgspec.Raw]] = {}
        for issue_type, pages in bodies.items():
            items: list[msgspec.Raw] = []
            for body in pages:
                page = decode(body)
                items.extend(page.sastFindings.findings if issue_type == "sast" else page.scaFindings.findings)
            self.items[issue_type] = items  # Raw slices: no copy of the bytes
        self.empty = {t: page_body(t, []) for t in ISSUE_TYPES}
        self._other: OrderedDict[tuple[str, int, int], bytes] = OrderedDict()
        self._lock = threading.Lock()

    def counts(self) -> dict[str, int]:
        return {t: len(items) for t, items in self.items.items()}

    def body(self, issue_type: str, page: int, page_size: int) -> bytes:
        """The body of one page: prebuilt for ``PAGE_SIZE``, else built once (a small cache)."""
        if page_size == PAGE_SIZE:
            pages = self.bodies[issue_type]
            return pages[page] if page < len(pages) else self.empty[issue_type]
        key = (issue_type, page, page_size)
        with self._lock:
            body = self._other.get(key)
            if body is None:
                body = page_body(issue_type, self.items[issue_type][page * page_size:(page + 1) * page_size])
                self._other[key] = body
                if len(self._other) > 64:
                    self._other.popitem(last=False)
            return body


def fetch_pages(base_url: str, token: str, slug: str) -> dict[str, list[bytes]]:
    """Every page (``PAGE_SIZE`` items) of each issue type from a running emulator, until a short or empty one."""
    import httpx

    decode = msgspec.json.Decoder(_Page).decode
    bodies: dict[str, list[bytes]] = {}
    with httpx.Client(base_url=base_url, headers={"Authorization": f"Bearer {token}"}, timeout=600.0) as client:
        for issue_type in ISSUE_TYPES:
            pages: list[bytes] = []
            for number in itertools.count():
                response = client.get(f"/api/v1/deployments/{slug}/findings",
                                      params={"issue_type": issue_type, "page": number, "page_size": PAGE_SIZE})
                response.raise_for_status()
                pages.append(response.content)
                page = decode(response.content)
                if len((page.sastFindings if issue_type == "sast" else page.scaFindings).findings) < PAGE_SIZE:
                    break
            bodies[issue_type] = pages
    return bodies


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], pages: Pages, token: str, slug: str, deployment_id: str) -> None:
        super().__init__(address, Handler)
        self.pages = pages
        self.authorization = f"Bearer {token}"
        self.findings_path = f"/api/v1/deployments/{slug}/findings"
        self.health = orjson.dumps({"status": "ok", "deployment_id": deployment_id, "deployment_slug": slug,
                                    "server": "page_server", "findings": pages.counts()})
        self.log: list[dict[str, Any]] = []
        self.seq = itertools.count(1)
        self.log_lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True  # headers and body go out at once, no delayed-ACK stalls
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        """No access log."""

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._send(status, orjson.dumps({"error": message, "status": status}))

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == self.server.findings_path:
            self._findings(url.query)
        elif url.path == "/_emulator/health":
            self._send(200, self.server.health)
        elif url.path == "/_emulator/requests":
            with self.server.log_lock:
                body = orjson.dumps({"requests": list(self.server.log)})
            self._send(200, body)
        else:
            self._error(404, f"not served here: {url.path}")

    def do_DELETE(self) -> None:
        if urlsplit(self.path).path == "/_emulator/requests":
            with self.server.log_lock:
                self.server.log.clear()
            self._send(200, b'{"cleared":true}')
        else:
            self._error(404, f"not served here: {self.path}")

    def _findings(self, query_string: str) -> None:
        query = parse_qs(query_string, keep_blank_values=True)
        status, body = self._page(query)
        with self.server.log_lock:
            self.server.log.append({"seq": next(self.server.seq), "method": "GET", "path": self.server.findings_path,
                                    "operation": "findings", "query": query, "body": None, "status": status})
        self._send(status, body)

    def _page(self, query: dict[str, list[str]]) -> tuple[int, bytes]:
        if self.headers.get("Authorization") != self.server.authorization:
            return 401, b'{"error":"missing or invalid token"}'
        unknown = sorted(set(query) - ALLOWED_PARAMETERS)
        if unknown:
            return 400, orjson.dumps({"error": f"the page server holds the unfiltered listing only: {unknown}"})
        issue_type = query.get("issue_type", ["sast"])[-1]
        if issue_type not in ISSUE_TYPES:
            return 400, orjson.dumps({"error": f"issue_type must be one of {ISSUE_TYPES}"})
        try:
            page = int(query.get("page", ["0"])[-1])
            page_size = int(query.get("page_size", [str(FINDINGS_PAGE_SIZE.default)])[-1])
        except ValueError:
            return 400, b'{"error":"page and page_size must be integers"}'
        if page < 0 or not FINDINGS_PAGE_SIZE.minimum <= page_size <= FINDINGS_PAGE_SIZE.maximum:
            limit = FINDINGS_PAGE_SIZE
            return 400, orjson.dumps({"error": f"page >= 0, {limit.minimum} <= page_size <= {limit.maximum}"})
        return 200, self.server.pages.body(issue_type, page, page_size)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--findings", type=int, help="start an emulator of this many findings to take pages from")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--from-url", help="take the pages from this running emulator instead")
    parser.add_argument("--slug", help="deployment slug (with --from-url; default: the emulator's health says)")
    parser.add_argument("--token", required=True, help="the token to require (and to send to the emulator)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if (args.findings is None) == (args.from_url is None):
        parser.error("give --findings or --from-url")

    started = time.perf_counter()
    if args.findings is not None:
        from findings_emulator.testing import EmulatorProcess

        with EmulatorProcess(findings=args.findings, token=args.token, seed=args.seed, startup_timeout=1800) as emu:
            slug, deployment_id = emu.deployment_slug, emu.deployment_id
            bodies = fetch_pages(emu.base_url, args.token, slug)
    else:
        import httpx

        health = httpx.get(f"{args.from_url}/_emulator/health", timeout=60.0).json()
        slug, deployment_id = args.slug or health["deployment_slug"], health["deployment_id"]
        bodies = fetch_pages(args.from_url, args.token, slug)
    pages = Pages(bodies)
    server = Server((args.host, args.port), pages, args.token, slug, deployment_id)
    host, port = str(server.server_address[0]), int(server.server_address[1])
    megabytes = sum(len(b) for pages_ in bodies.values() for b in pages_) / 1e6
    # the parent reads this line to learn the address
    print(f"READY http://{host}:{port} {slug} {deployment_id} {time.perf_counter() - started:.3f} "
          f"{pages.counts()} {megabytes:.0f}MB", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever(poll_interval=0.5)
    finally:
        server.server_close()


class PageServerProcess(EmulatorAdmin):
    """``page_server.py`` as a subprocess in its own process group; ``base_url``, ``token``, ``deployment_slug``,
    ``deployment_id``, ``startup_seconds`` (fetching the pages included) and ``counts`` (findings per type). A
    client of the emulator's routes it answers (:class:`EmulatorAdmin`: ``client()``, ``health()``,
    ``requests()``)."""

    def __init__(self, *, token: str, findings: int | None = None, from_url: str | None = None,
                 log_path: str | Path | None = None, startup_timeout: float = 1800.0,
                 env: dict[str, str] | None = None) -> None:
        source = ["--findings", str(findings)] if findings is not None else ["--from-url", str(from_url)]
        command = [sys.executable, str(BENCH_DIR / "page_server.py"), *source, "--token", token]
        started = time.monotonic()
        self._log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        self._process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL,
                                         start_new_session=True, env=env or dict(os.environ))
        try:
            line = self._ready_line(startup_timeout)
        except BaseException:
            self._stop_process()
            raise
        parts = line.split(" ", 5)
        super().__init__(parts[1], token)
        self.deployment_slug, self.deployment_id = parts[2], parts[3]
        self.build_seconds = float(parts[4])
        self.startup_seconds = time.monotonic() - started
        self.description = parts[5]

    def _ready_line(self, timeout: float) -> str:
        stdout = self._process.stdout
        assert stdout is not None
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(stdout.readline().decode()), daemon=True)
        reader.start()
        reader.join(timeout)
        if not result or not result[0].startswith("READY "):
            raise RuntimeError(f"page server did not start (exit code {self._process.poll()}): {result}")
        return result[0].strip()

    @property
    def pid(self) -> int:
        return self._process.pid

    def stop(self) -> None:
        """Close the admin connection, terminate the server's process group (by its pid) and wait for it."""
        self.close()
        self._stop_process()

    def _stop_process(self) -> None:
        stop_process_group(self._process)
        if self._process.stdout is not None:
            self._process.stdout.close()
        if not isinstance(self._log, int):  # a file of our own, not subprocess.DEVNULL
            self._log.close()

    def __enter__(self) -> PageServerProcess:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


if __name__ == "__main__":
    main()
