"""The React app's bundle as Airflow's UI loads it: an ES module that Node.js parses, that uses only the globals
Airflow shares with plugins (React, ReactRouterDOM, ChakraUI), and that registers one component under each name
the plugin declares (``links.APP_NAMES``: Airflow keys a loaded plugin component by its react app's name)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from findings_provider.dashboard import links
from findings_provider.dashboard.app import BUNDLE

from devtools.services import skip_or_fail

BUNDLE_PATH = Path(links.__file__).parent / "static" / BUNDLE
#: Stand-ins for what Airflow's UI puts on globalThis: any component, hook or function the bundle asks for.
PRELUDE = """
const anything = new Proxy(function () { return null; }, { get: (target, key) => key === Symbol.toPrimitive ?
  undefined : anything, apply: () => null });
globalThis.React = { createElement: () => null, useState: (v) => [v, () => {}], useEffect: () => {},
  Fragment: "fragment" };
globalThis.ReactRouterDOM = anything;
globalThis.ChakraUI = anything;
globalThis.document = { title: "", baseURI: "http://airflow.test/",
  documentElement: { classList: { contains: () => false } } };
const module = await import(process.argv[1]);
const names = JSON.parse(process.argv[2]);
console.log(JSON.stringify({
  registered: Object.fromEntries(names.map((n) => [n, typeof globalThis[n]])),
  airflowPlugin: globalThis.AirflowPlugin === module.default && typeof module.default,
}));
"""


def node() -> str:
    found = shutil.which("node")
    if found is None:
        skip_or_fail("Node.js is not installed (it checks the dashboard's bundle)")
    assert found is not None
    return found


def test_the_bundle_loads_with_airflows_shared_globals_and_registers_every_app_name() -> None:
    names = list(links.APP_NAMES.values())
    result = subprocess.run([node(), "--input-type=module", "-e", PRELUDE, BUNDLE_PATH.as_uri(), json.dumps(names)],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.strip().splitlines()[-1])
    assert loaded["registered"] == dict.fromkeys(names, "function")
    assert loaded["airflowPlugin"] == "function"  # Airflow 3.1's loader reads globalThis.AirflowPlugin


def test_a_syntax_error_in_the_bundle_is_caught(tmp_path: Path) -> None:
    broken = tmp_path / "broken.js"
    broken.write_text(BUNDLE_PATH.read_text(encoding="utf-8").replace(
        "function Overview({ params, setParams })", "function Overview({ params, setParams }", 1))
    result = subprocess.run([node(), "--input-type=module", "-e", PRELUDE, broken.as_uri(), "[]"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode != 0
    assert "SyntaxError" in result.stderr
