from __future__ import annotations

import subprocess
import sys
import types

import parley.engine


def test_engine_all_sorted() -> None:
    assert parley.engine.__all__ == sorted(
        parley.engine.__all__, key=lambda n: (not n.isupper(), n)
    )


def test_engine_all_complete() -> None:
    public = {
        name
        for name, value in vars(parley.engine).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == set(parley.engine.__all__)


def test_engine_import_loads_no_web_layer_and_no_model_library() -> None:
    forbidden = ("parley.api", "parley.services", "parley.db", "parley.config", "starlette",
                 "fastapi", "hibari", "onnxruntime", "faster_whisper", "ctranslate2",
                 "openai")  # fmt: skip
    code = (
        "import sys, parley.engine\n"
        f"print([m for m in sys.modules if m.split('.')[0] in {forbidden!r} "
        f"or m.startswith({forbidden!r})])"
    )
    result = subprocess.run(  # noqa: S603 - fixed argv, this interpreter
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
