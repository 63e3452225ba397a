"""PARLEY_TURN_DETECTION: semantic when the end-of-turn model is installed, else vad."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from parley.composition.options import engine_options
from parley.engine import TurnModelUnavailable, build_engine_factory, installed_turn_model


def test_turn_detection_unset_semantic_when_model_installed(settings_factory: Any) -> None:
    options = engine_options(settings_factory())
    assert installed_turn_model().is_file()  # scripts/install put it there
    assert options.turn_detection == "semantic"
    assert options.turn_model == installed_turn_model()


def test_turn_detection_unset_vad_when_model_missing(settings_factory: Any, tmp_path: Path) -> None:
    options = engine_options(settings_factory(turn_model=tmp_path / "missing.onnx"))
    assert options.turn_detection == "vad"
    assert build_engine_factory(options).turn_model is None


def test_turn_detection_vad_chosen_runs_without_the_model(settings_factory: Any) -> None:
    options = engine_options(settings_factory(turn_detection="vad"))
    assert options.turn_detection == "vad"
    assert build_engine_factory(options).turn_model is None


def test_turn_detection_semantic_without_model_unavailable(
    settings_factory: Any, tmp_path: Path
) -> None:
    settings = settings_factory(turn_detection="semantic", turn_model=tmp_path / "missing.onnx")
    with pytest.raises(TurnModelUnavailable, match="not installed"):
        build_engine_factory(engine_options(settings))


def test_turn_detection_unknown_value_refused(settings_factory: Any) -> None:
    with pytest.raises(ValueError, match="turn_detection"):
        settings_factory(turn_detection="silence")
