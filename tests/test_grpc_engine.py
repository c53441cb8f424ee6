"""Selecting gRPC's polling engine (replog/grpc_engine.py): when it applies, when it is kept
off, and that the installed grpcio still knows the switches it names.

Each case runs in a fresh interpreter: gRPC reads the variable once per process, at import.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from replog.grpc_engine import (
    GRPC_EXPERIMENTS_VARIABLE,
    POLL_ENGINE_EXPERIMENTS,
    engine_description,
)


def run_python(code: str, experiments: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != GRPC_EXPERIMENTS_VARIABLE}
    if experiments is not None:
        env[GRPC_EXPERIMENTS_VARIABLE] = experiments
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )


SHOW = "import os; print(repr(os.environ.get('GRPC_EXPERIMENTS')))"


def test_importing_the_command_line_package_selects_the_polling_engine() -> None:
    result = run_python("import replog.cli; " + SHOW, None)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == repr(POLL_ENGINE_EXPERIMENTS)


def test_an_operator_setting_is_kept_even_when_empty() -> None:
    for chosen in ("", "-event_engine_client"):
        result = run_python("import replog.cli; " + SHOW, chosen)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == repr(chosen)


def test_once_grpc_is_imported_it_is_too_late_and_nothing_changes() -> None:
    code = (
        "import grpc\n"
        "from replog.grpc_engine import select_poll_engine\n"
        "print(select_poll_engine())\n" + SHOW
    )
    result = run_python(code, None)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "None"]


def test_the_client_library_leaves_the_process_alone() -> None:
    result = run_python("import replog, replog.aio; replog.Producer; " + SHOW, None)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "None"


def test_the_installed_grpcio_knows_the_switches() -> None:
    # grpcio logs "Unknown experiment: <name>" at import for a name it does not have; if a
    # release drops these, the switch silently stops working, and this says so.
    code = "import grpc; grpc.insecure_channel('127.0.0.1:1').close(); print('ok')"
    known = run_python(code, POLL_ENGINE_EXPERIMENTS)
    assert known.returncode == 0 and known.stdout.strip() == "ok", known.stderr
    assert "Unknown experiment" not in known.stderr, known.stderr
    unknown = run_python(code, "-event_engine_no_such_switch")
    assert "Unknown experiment: event_engine_no_such_switch" in unknown.stderr


def test_the_start_up_line_names_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(GRPC_EXPERIMENTS_VARIABLE, raising=False)
    assert "EventEngine" in engine_description()
    monkeypatch.setenv(GRPC_EXPERIMENTS_VARIABLE, POLL_ENGINE_EXPERIMENTS)
    assert "polling engine" in engine_description()
    monkeypatch.setenv(GRPC_EXPERIMENTS_VARIABLE, "")
    assert "set by the operator" in engine_description()
