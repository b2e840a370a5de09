"""``findings_emulator.testing.EmulatorProcess``: an emulator that starts on a port another process took between
the choice and the bind (tests run on several workers at once) moves to another port, never talks to the other."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from findings_emulator import testing
from findings_emulator.testing import EmulatorProcess

pytestmark = pytest.mark.integration


def _first_port(monkeypatch: pytest.MonkeyPatch, port: int) -> None:
    """``free_port`` answers ``port`` once, then as usual."""
    ports: Iterator[int] = iter([port])
    choose = testing.free_port
    monkeypatch.setattr(testing, "free_port", lambda: next(ports, None) or choose())


def test_health_names_the_emulators_process() -> None:
    with EmulatorProcess(findings=5) as emu:
        assert emu.health()["pid"] == emu.pid


def test_a_port_another_emulator_answers_on_is_left_for_a_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    with EmulatorProcess(findings=5, seed=1) as other:
        _first_port(monkeypatch, other.port)
        with EmulatorProcess(findings=5, seed=2) as emu:
            assert emu.port != other.port
            assert emu.health()["pid"] == emu.pid
            assert other.health()["pid"] == other.pid  # the other one is left alone


def test_a_port_held_by_another_process_is_left_for_a_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        _first_port(monkeypatch, held.getsockname()[1])
        with EmulatorProcess(findings=5) as emu:
            assert emu.port != held.getsockname()[1]
            assert emu.health()["pid"] == emu.pid


def test_a_port_the_caller_named_is_not_changed() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        with pytest.raises(RuntimeError, match=r"already in use"):
            EmulatorProcess(findings=5, port=held.getsockname()[1], startup_timeout=30)
