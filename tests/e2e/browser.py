"""The browser of the browser tests: headless Chromium (Debian's ``chromium`` package) driven by Playwright for
Python, logged in to the Airflow UI of the session's e2e stack (``browser_page`` in ``conftest.py``).

Playwright's own browser download does not work here (no internet): ``make browser-deps`` installs Debian's
chromium, started with ``executable_path``. Missing chromium or Playwright skips, or fails with REQUIRE_SERVICES=1.
Screenshots are kept in ``test-artifacts/screenshots/``.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from devtools.stack import Stack

from .helpers import ARTIFACTS, skip_or_fail

SCREENSHOTS = ARTIFACTS / "screenshots"
#: Flags this machine needs (closed network; root): see the machine notes.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
TIMEOUT_MS = 30_000


def chromium_path() -> str | None:
    for candidate in (os.environ.get("CHROMIUM_PATH"), shutil.which("chromium"), "/usr/bin/chromium",
                      shutil.which("chromium-browser")):
        if candidate and Path(candidate).is_file():
            return candidate
    return None


def login(page: Any, base_url: str, username: str, password: str) -> None:
    """The simple auth manager's login form (``/auth/login``), then back to the UI."""
    page.goto(f"{base_url}/")
    page.wait_for_url(re.compile(r"/auth/login"), timeout=TIMEOUT_MS)
    page.locator("input[name=username]").fill(username)
    page.locator("input[name=password]").fill(password)
    page.get_by_role("button", name=re.compile("sign in", re.I)).click()
    page.wait_for_url(lambda url: "/auth/login" not in url, timeout=TIMEOUT_MS)


@contextmanager
def logged_in_page(stack: Stack) -> Iterator[Any]:
    """A page of a fresh Chromium profile, logged in to ``stack``'s UI; a failure leaves ``failure.png``."""
    chromium = chromium_path()
    if chromium is None:
        skip_or_fail("Debian's chromium is not installed (make browser-deps)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        skip_or_fail("playwright (Python) is not installed (pip install -r requirements-test.txt)")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(
            profile, executable_path=chromium, args=CHROMIUM_FLAGS, headless=True,
            viewport={"width": 1440, "height": 900},
        )
        try:
            page = context.new_page()
            page.set_default_timeout(TIMEOUT_MS)
            login(page, stack.ui_url, stack.username, stack.password)
            yield page
        except BaseException:
            with_page = context.pages[0] if context.pages else None
            if with_page is not None:
                with_page.screenshot(path=str(SCREENSHOTS / "failure.png"), full_page=True)
            raise
        finally:
            context.close()
