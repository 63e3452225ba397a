"""`/examples/`: the example clients that ship inside the package, served by Parley.

`/examples/browser/` is the browser voice client (src/parley/examples/browser/index.html).
It takes its credential from the URL fragment, which browsers never send to a server, and
its WebSocket base URL from its own origin, so it works on any host and port. No credential
is needed to load it.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

EXAMPLES_PATH = "/examples"


def examples_directory() -> Path:
    """Return the directory of the packaged examples."""
    return Path(str(files("parley") / "examples"))


def install_examples(app: FastAPI) -> None:
    """Serve the packaged examples under /examples (`/examples/browser/` is the page)."""
    app.mount(
        EXAMPLES_PATH, StaticFiles(directory=examples_directory(), html=True), name="examples"
    )
