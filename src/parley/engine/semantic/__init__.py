"""Semantic end of turn: a model judges whether the user finished a thought (docs/engine.md)."""

from parley.engine.semantic.params import SemanticParams
from parley.engine.semantic.smart_turn import (
    MODEL_NAME,
    SmartTurn,
    check_turn_model,
    installed_turn_model,
)

__all__ = [
    "MODEL_NAME",
    "SemanticParams",
    "SmartTurn",
    "check_turn_model",
    "installed_turn_model",
]
