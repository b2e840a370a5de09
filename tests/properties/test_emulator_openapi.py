"""Schemathesis against the emulator's served OpenAPI document: generated requests, valid (positive) and invalid
(negative), to every API operation never produce a server error; admin routes stay out of the document.

Schemathesis' pytest integration (``from_fixture``) does not work with this pytest version, so its Python API
drives Hypothesis directly: one bounded run per operation and generation mode. Half of the cases name the served
deployment in the path, so that generated bodies and queries reach the operations' own validation instead of
stopping at "deployment not found".
"""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest
import schemathesis
from chaos.harness import TOKEN, emulator_settings, tally
from findings_emulator.testing import EmulatorProcess
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Err

pytestmark = pytest.mark.integration
MAX_EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "20"))  # per operation and generation mode


@pytest.fixture(scope="module")
def emulator_options() -> dict[str, Any]:
    """The shared ``emulator`` (``tests/fixtures.py``) with the chaos suites' options."""
    return emulator_settings(findings=300)


def operations(base_url: str) -> list:
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    out = []
    for result in schema.get_all_operations():
        if isinstance(result, Err):  # the emulator's schema does not load: say why
            raise result.err()
        out.append(result.ok())
    return out


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
def test_no_server_error_for_any_generated_request(mode: GenerationMode, emulator: EmulatorProcess) -> None:
    failures: list[str] = []
    ops = operations(emulator.base_url)
    assert len(ops) >= 15, [op.label for op in ops]
    for operation in ops:
        assert not operation.path.startswith("/_emulator")

        @settings(max_examples=MAX_EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy(generation_mode=mode), real_deployment=st.booleans())
        def run(case, real_deployment: bool) -> None:
            tally(f"schemathesis.cases.{mode.value}")
            if real_deployment:
                if "deploymentId" in (case.path_parameters or {}):
                    case.path_parameters["deploymentId"] = emulator.deployment_id
                if "deploymentSlug" in (case.path_parameters or {}):
                    case.path_parameters["deploymentSlug"] = emulator.deployment_slug
            response = case.call(base_url=emulator.base_url, headers={"Authorization": f"Bearer {TOKEN}"},
                                 timeout=30)
            assert response.status_code < 500, f"{case.operation.label}: {response.status_code} {response.text[:300]}"
            case.validate_response(response, checks=[not_a_server_error])

        try:
            run()
        except Unsatisfiable:  # nothing to make invalid (no parameters, no body): no negative cases
            assert mode is GenerationMode.NEGATIVE, operation.label
            tally("schemathesis.operations_without_negative_cases")
        except Exception as exc:  # collect every operation's failure, not just the first
            failures.append(f"{operation.label}: {exc}"[:2000])
    assert not failures, "\n\n".join(failures)


def test_the_document_lists_every_api_operation_and_no_admin_route(emulator: EmulatorProcess) -> None:
    document = httpx.get(f"{emulator.base_url}/openapi.json", timeout=30).json()
    paths = set(document["paths"])
    assert not [p for p in paths if p.startswith("/_emulator")]
    methods = {method for item in document["paths"].values() for method in item}
    assert len(paths) >= 13
    assert methods >= {"get", "post", "put", "patch", "delete"}
