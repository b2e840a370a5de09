"""Write policies must narrow their selection and carry a cap: the file names file, line and policy otherwise.

And ``include/pipeline.yaml`` documents every setting of ``PipelineConfig`` with its default.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from findings_provider.config import (
    DEFAULT_MAX_TICKETS,
    DEFAULT_MAX_TRIAGED,
    ConfigError,
    PipelineConfig,
    TicketPolicy,
    TriagePolicy,
    load_pipeline_config,
)
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_PATH = ROOT / "include" / "pipeline.yaml"
SHIPPED = SHIPPED_PATH.read_text()


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


def test_policies_given_to_an_operator_are_validated_and_anything_but_a_list_is_refused() -> None:
    given = [{"name": "p", "issue_type": "sca", "select": {"reachability": ["always reachable"]}}]
    (policy,) = TicketPolicy.coerce_all(given)
    assert policy.selector.columns() == {"reachability": ["always_reachable"]}
    assert TicketPolicy.coerce_all([]) == []
    assert TicketPolicy.coerce_all([policy]) == [policy]
    shipped = load_pipeline_config().ticket_creation.policies
    assert TicketPolicy.coerce_all(shipped) == list(shipped)
    with pytest.raises(ValueError, match="select"):
        TriagePolicy.coerce_all([{"name": "q", "issue_type": "sast", "set": {"triage_state": "ignored"},
                                  "select": {}}])
    wrongs: list[Any] = [None, "autotriage-false-positives", given[0]]
    for wrong in wrongs:
        with pytest.raises(ConfigError, match=r"^policies = .*: give a list of TicketPolicy"):
            TicketPolicy.coerce_all(wrong)


# --- the shipped file documents every setting ------------------------------------------------------------------

#: Where the shipped file sets something other than the model's default, on purpose (path: why). Everything else it
#: sets is the model's default, so a section left out of someone's copy behaves as documented here.
SHIPPED_CHOICES = {
    "autotriage_triage.schedule": "a daily run besides the findings Asset (the model's None: on the Asset only)",
    "ticket_creation.schedule": "a daily run besides the triage Asset, retrying failed items (None: the Asset only)",
    "autotriage_triage.policies": "the shipped triage policy (the model has none)",
    "ticket_creation.policies": "the shipped ticket policies (the model has none)",
    "policy_tuning.rules": "the shipped mode rules (the model has none)",
}


def _model(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def undocumented_settings(path: Path) -> list[str]:
    """What the pipeline file at ``path`` leaves out of ``PipelineConfig`` or documents with another value than the
    model's default (beyond ``SHIPPED_CHOICES``).

    Every field is a key of its section, recursively through the sections (fields that are models). A model whose
    fields all default to None (``alerts.deadlines``, ``sla.fix_days``) is a map documented by its value: the
    names with a value, a name left out meaning None (the file lists recommended deadlines in comments). Values are
    compared after validation (``always reachable`` is ``always_reachable``, ``30`` is ``30.0``).
    """
    raw = yaml.safe_load(path.read_text())
    loaded = load_pipeline_config(path).model_dump(mode="json", by_alias=True)
    default = PipelineConfig().model_dump(mode="json", by_alias=True)
    problems: list[str] = []

    def walk(model: type[BaseModel], raw_node: Any, loaded_node: Any, default_node: Any, where: str) -> None:
        for name, field in model.model_fields.items():
            if field.exclude:
                continue
            key = field.alias or name
            at = f"{where}{key}"
            if not isinstance(raw_node, dict) or key not in raw_node:
                problems.append(f"{at}: not in the file")
                continue
            section = _model(field.annotation)
            is_map = section is not None and all(f.default is None for f in section.model_fields.values())
            if section is not None and not is_map:
                walk(section, raw_node[key], loaded_node[key], default_node[key], f"{at}.")
                continue
            value, wanted = loaded_node[key], default_node[key]
            if is_map:
                value = {k: v for k, v in value.items() if v is not None}
                wanted = {k: v for k, v in wanted.items() if v is not None}
            if at in SHIPPED_CHOICES:
                if value == wanted:
                    problems.append(f"{at}: listed in SHIPPED_CHOICES but the file has the model's default")
            elif value != wanted:
                problems.append(f"{at}: the file has {value!r}, the model's default is {wanted!r}")

    walk(PipelineConfig, raw, loaded, default, "")
    return problems


def test_the_shipped_file_documents_every_setting_with_the_models_default() -> None:
    """A new section or field of ``PipelineConfig`` (a new DAG's section) goes into ``include/pipeline.yaml`` with
    its default; a default changed in the model or in the file alone fails here."""
    assert undocumented_settings(SHIPPED_PATH) == []


def test_a_section_or_field_left_out_or_a_different_value_is_named(tmp_path) -> None:
    data = yaml.safe_load(SHIPPED)
    del data["dependency_inventory"]
    del data["pool"]["slots"]
    data["dashboard"]["page_size"] = 50
    data["sla"]["fix_days"]["low"] = 180
    data["policy_tuning"]["rules"] = []
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))

    problems = undocumented_settings(path)

    assert problems == [
        "pool.slots: not in the file",
        "policy_tuning.rules: listed in SHIPPED_CHOICES but the file has the model's default",
        "dependency_inventory: not in the file",
        "sla.fix_days: the file has {'critical': 7, 'high': 30, 'medium': 90, 'low': 180}, the model's default is "
        "{'critical': 7, 'high': 30, 'medium': 90}",
        "dashboard.page_size: the file has 50, the model's default is 100",
    ]
