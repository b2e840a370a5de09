"""Write policies must narrow their selection and carry a cap: the file names file, line and policy otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from findings_provider.config import (
    DEFAULT_MAX_TICKETS,
    DEFAULT_MAX_TRIAGED,
    ConfigError,
    TicketPolicy,
    TriagePolicy,
    load_pipeline_config,
)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = (ROOT / "include" / "pipeline.yaml").read_text()


def write(tmp_path: Path, select: object, section: str = "autotriage_triage") -> Path:
    """The shipped file with the first policy of ``section`` selecting ``select`` (None: ``select:`` empty)."""
    data = yaml.safe_load(SHIPPED)
    data[section]["policies"][0]["select"] = select
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("select", "message"),
    [
        ({}, "select names no condition, so it would select every finding"),
        (None, "select is missing or empty"),
        ({"status": ["open"], "autotriage_verdict": None}, "select key(s) autotriage_verdict left empty"),
        ({"status": []}, "select key(s) status left empty"),
        ({"repository_name": ["", "  "]}, "select key(s) repository_name left empty"),
        ({"status": None, "severity": None}, "select key(s) severity, status left empty"),
    ],
)
def test_a_selector_that_would_select_everything_is_refused(tmp_path, select, message) -> None:
    path = write(tmp_path, select)
    with pytest.raises(ConfigError) as raised:
        load_pipeline_config(path)
    text = str(raised.value)
    assert text.startswith(f"{path}, line ")
    assert "policy 'autotriage-false-positives'" in text
    assert message in text
    line = int(text.split(", line ")[1].split(":")[0])  # the policy's select, or a key of it
    lines = path.read_text().splitlines()
    name_line = next(i for i, text in enumerate(lines, 1) if "name: autotriage-false-positives" in text)
    assert "select:" in lines[line - 1] or "select:" in lines[line - 2]
    assert name_line < line <= name_line + 4


def test_ticket_policies_are_held_to_the_same_rule(tmp_path) -> None:
    path = write(tmp_path, {"severity": []}, section="ticket_creation")
    with pytest.raises(ConfigError, match="policy 'code-true-positives': select key"):
        load_pipeline_config(path)


def test_policies_have_safe_caps_and_a_dump_validates_again() -> None:
    cfg = load_pipeline_config()
    assert all(p.max_findings == DEFAULT_MAX_TRIAGED == 5000 for p in cfg.autotriage_triage.policies)
    assert all(p.max_tickets == DEFAULT_MAX_TICKETS == 100 for p in cfg.ticket_creation.policies)
    for policy in cfg.autotriage_triage.policies:
        assert TriagePolicy.model_validate(policy.model_dump()) == policy
    for ticket_policy in cfg.ticket_creation.policies:
        assert TicketPolicy.model_validate(ticket_policy.model_dump()) == ticket_policy
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        TriagePolicy.model_validate({**cfg.autotriage_triage.policies[0].model_dump(), "max_findings": 0})


def test_a_secrets_policy_selects_on_validation_state_in_either_spelling(tmp_path) -> None:
    """The real service's ``VALIDATION_STATE_CONFIRMED_VALID`` and the reference filter's ``valid`` are both the
    canonical ``confirmed_valid`` the warehouse stores; a value of neither vocabulary names the field."""
    import msgspec
    import orjson
    from findings_provider.config import FindingSelector
    from findings_provider.pipeline.selection import select_findings
    from findings_provider.warehouse import finding_rows
    from fixtures import make_warehouse

    selector = FindingSelector(status=["FINDING_STATUS_OPEN"],
                               validation_state=["VALIDATION_STATE_CONFIRMED_VALID", "valid", "no_validator"])
    assert selector.columns() == {"status": ["open"],
                                  "validation_state": ["confirmed_valid", "confirmed_valid", "no_validator"]}
    with pytest.raises(ValueError, match="validation_state"):
        FindingSelector(validation_state=["works"])

    warehouse = make_warehouse(tmp_path / "w.db")
    secrets = [
        {"id": "1", "status": "FINDING_STATUS_OPEN", "validationState": "VALIDATION_STATE_CONFIRMED_VALID"},
        {"id": "2", "status": "FINDING_STATUS_OPEN", "validationState": "VALIDATION_STATE_CONFIRMED_INVALID"},
        {"id": "3", "status": "open", "validation_state": "no_validator"},
        {"id": "4", "status": "FINDING_STATUS_FIXED", "validationState": "VALIDATION_STATE_CONFIRMED_VALID"},
    ]
    warehouse.upsert_findings(finding_rows("secrets", [msgspec.Raw(orjson.dumps(s)) for s in secrets]))
    assert [f.id for f in select_findings(warehouse, "secrets", selector)] == [1, 3]


def test_policies_given_to_an_operator_are_validated_and_the_default_is_read_only_without_them() -> None:
    def no_default() -> list:
        raise AssertionError("the default was read although policies were given")

    given = [{"name": "p", "issue_type": "sca", "select": {"reachability": ["always reachable"]}}]
    (policy,) = TicketPolicy.coerce_all(given, no_default)
    assert policy.selector.columns() == {"reachability": ["always_reachable"]}
    assert TicketPolicy.coerce_all([], no_default) == []
    assert TicketPolicy.coerce_all([policy], no_default) == [policy]
    shipped = load_pipeline_config().ticket_creation.policies
    assert TicketPolicy.coerce_all(None, lambda: shipped) == list(shipped)
    with pytest.raises(ValueError, match="select"):
        TriagePolicy.coerce_all([{"name": "q", "issue_type": "sast", "set": {"triage_state": "ignored"},
                                  "select": {}}], no_default)
