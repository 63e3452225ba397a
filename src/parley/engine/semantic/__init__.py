"""Semantic end of turn: a model judges whether the user finished a thought, and the words so
far are a second signal (docs/engine.md)."""

from parley.engine.semantic.params import SemanticParams
from parley.engine.semantic.smart_turn import (
    MODEL_NAME,
    SmartTurn,
    check_turn_model,
    installed_turn_model,
)
from parley.engine.semantic.words import holds_the_turn, reads_words

__all__ = [
    "MODEL_NAME",
    "SemanticParams",
    "SmartTurn",
    "check_turn_model",
    "holds_the_turn",
    "installed_turn_model",
    "reads_words",
]
