"""docs/jwt.md's "Try it on your machine" block, run as written against a real `parley serve`:
`parley keys generate`'s jwks.json registered whole as a static key, a token minted without
`--kid`, and a conversation read with it."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.serve_process import ServeProcess

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Try it on your machine"


def guide_block() -> str:
    """The shell block of the guide's local example."""
    text = (ROOT / "docs" / "jwt.md").read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1]
    found = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert found, "the local example must be a sh block"
    return found.group(1)


@pytest.mark.timeout(180)
def test_jwt_guide_local_example_reads_the_conversation_with_a_minted_token(
    tmp_path: Path,
) -> None:
    server = ServeProcess(tmp_path)
    server.start()
    try:
        assert server.first_key is not None
        script, replaced = re.subn(
            r"^KEY=\S+", f"KEY={server.first_key}", guide_block(), flags=re.MULTILINE
        )
        assert replaced == 1, "the block must start by setting KEY"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PARLEY_")}
        env["PORT"] = str(server.port)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        ran = subprocess.run(  # noqa: S603 - the guide's block, in a temporary directory
            ["bash", "-euo", "pipefail", "-c", script],  # noqa: S607
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        server.ensure_stopped()
    assert ran.returncode == 0, ran.stderr
    replies = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    registered, read = replies[0], replies[-1]
    kid = json.loads((tmp_path / "parley-keys" / "jwks.json").read_text())["keys"][0]["kid"]
    assert [key["kid"] for key in registered["keys"]] == [kid], registered
    assert read["conversation"]["id"] == "demo-1", read
