"""`parley serve` refuses a speech model that is not one, or not installed, before serving."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from parley.cli import app

runner = CliRunner()


@pytest.fixture
def cli_env(database_url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PARLEY_DATABASE_URL", database_url)
    monkeypatch.delenv("PARLEY_REDIS_URL", raising=False)
    return database_url


@pytest.mark.parametrize("kind", ["missing", "empty"])
def test_serve_stt_model_not_a_model_refused_with_clear_message(
    cli_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    model = tmp_path / "model"
    if kind == "empty":
        model.mkdir()
    monkeypatch.setenv("PARLEY_STT_MODEL", str(model))
    result = runner.invoke(app, ["serve", "--port", "1"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: PARLEY_STT_MODEL: ")
    assert str(model) in result.stderr
    assert "Set PARLEY_STT_MODEL to tiny.en, base, small or a CTranslate2" in result.stderr
    assert "PARLEY_STT=none" in result.stderr
    assert "Traceback" not in result.output


def test_serve_stt_model_unknown_name_refused_exit_2(
    cli_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARLEY_STT_MODEL", "medium")
    result = runner.invoke(app, ["serve", "--port", "1"])
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: PARLEY_STT_MODEL: 'medium' is neither a speech model name (tiny.en, base, "
        "small) nor a directory."
    )
    assert "Traceback" not in result.output


def test_serve_stt_model_name_not_installed_refused_exit_2_saying_how(
    cli_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """small is not on PyPI whole: scripts/install never installs it (docs/engine.md)."""
    monkeypatch.setenv("PARLEY_STT_MODEL", "small")
    result = runner.invoke(app, ["serve", "--port", "1"])
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: PARLEY_STT_MODEL: The speech model small is not installed: PyPI has no "
        "complete copy: convert it (docs/engine.md) into "
    )
    assert "Traceback" not in result.output


def test_serve_llm_base_url_without_model_refused(
    cli_env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PARLEY_LLM_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.delenv("PARLEY_LLM_MODEL", raising=False)
    result = runner.invoke(app, ["serve", "--port", "1"])
    assert result.exit_code != 0
    assert "PARLEY_LLM_MODEL" in result.output


def test_serve_restores_default_collection_thresholds(
    cli_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command line collects less often (parley.__main__); a server keeps Python's
    defaults for its long life."""
    import gc

    monkeypatch.setenv("PARLEY_STT_MODEL", str(tmp_path / "missing"))  # stops before serving
    before = gc.get_threshold()
    gc.set_threshold(10_000, 10, 10)
    try:
        result = runner.invoke(app, ["serve", "--port", "1"])
        assert result.exit_code == 2
        assert gc.get_threshold() == (700, 10, 10)
    finally:
        gc.set_threshold(*before)


def test_serve_semantic_turn_detection_without_the_model_refused_exit_2(
    cli_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "smart-turn.onnx"
    monkeypatch.setenv("PARLEY_TURN_DETECTION", "semantic")
    monkeypatch.setenv("PARLEY_TURN_MODEL", str(model))
    result = runner.invoke(app, ["serve", "--port", "1"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: PARLEY_TURN_DETECTION=semantic: PARLEY_TURN_MODEL ")
    assert str(model) in result.stderr
    assert "scripts/install" in result.stderr
    assert "PARLEY_TURN_DETECTION=vad" in result.stderr
    assert "Traceback" not in result.output
