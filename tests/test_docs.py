"""The documentation stays inside the repository and in step with the implementation."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

import pytest

from parley import engine
from parley.app import create_app
from parley.config import Settings
from parley.errors import ValidationFailed
from parley.records import ToolCall
from parley.services.live import codec
from parley.services.live.relay import NOT_SENT
from parley.wires.frames import CLIENT_MESSAGE_TYPES
from parley.wires.parley_codec import ParleyCodec

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", ROOT / "scripts" / "README.md", *ROOT.glob("docs/*.md")])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
API_MD = ROOT / "docs" / "api.md"


def links_of(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return LINK.findall(text)


def anchors_of(path: Path) -> set[str]:
    """GitHub's heading slugs: lower case, punctuation dropped, spaces to dashes."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", path.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_links_stay_inside_repository(doc: Path) -> None:
    for target in links_of(doc):
        assert "://" not in target, (doc, target)
        assert not target.startswith("mailto:"), (doc, target)
        file_part, _, anchor = target.partition("#")
        resolved = (doc.parent / file_part).resolve() if file_part else doc
        assert resolved.is_relative_to(ROOT), (doc, target)
        assert resolved.exists(), (doc, target)
        if anchor and resolved.suffix == ".md":
            assert anchor in anchors_of(resolved), (doc, target)


def test_api_reference_lists_every_rest_route() -> None:
    app = create_app(Settings(database_url="sqlite:///unused.db"))
    text = API_MD.read_text(encoding="utf-8")
    for path, operations in app.openapi()["paths"].items():
        for method in operations:
            assert re.search(rf"`{method.upper()} {re.escape(path)}[`?]", text), (method, path)


def server_message_samples() -> list[object]:
    """One message of every kind the session sends (a test below keeps the list complete)."""
    call = ToolCall(id="call_1", tool_id="inline_t", tool_name="t", parameters={}, output={})
    return [
        codec.ConversationCreated("conv_1"),
        codec.ReadyToStart(),
        codec.RequestError(ValidationFailed()),
        codec.ToolCallRequested("call_1", "t", {}),
        codec.ToolCallProcessed(call),
        engine.InputText("hi", "en"),
        engine.AudioChunk(b"\x00\x00", "Hi."),
        engine.UserStartedSpeaking(),
        engine.UserFinishedSpeaking(),
        engine.InputCancelled(),
        engine.AssistantStartedSpeaking(),
        engine.AssistantFinishedSpeaking(),
        engine.InterruptedResponse("Hi"),
        engine.AssistantEndedConversation(),
        engine.KeypadPressed("1#"),
        engine.AssistantChoseNotToRespond(),
        engine.ToolCallInterrupted("call_1", "t"),
        engine.EngineWarning("w", "Warned."),
    ]


def test_server_message_samples_cover_every_outbound_kind() -> None:
    kinds = {type(sample) for sample in server_message_samples()}
    outbound = set(get_args(codec.Outbound)) - {codec.Closing, *get_args(engine.EngineEvent)}
    sent = set(get_args(engine.EngineEvent)) - set(NOT_SENT)
    assert outbound | sent <= kinds | {codec.Closing}


def test_api_reference_lists_every_websocket_message() -> None:
    text = API_MD.read_text(encoding="utf-8")
    wire = ParleyCodec()
    sent = {
        json.loads(frame)["type"]
        for sample in server_message_samples()
        for frame in wire.encode(sample)  # type: ignore[arg-type]
    }
    assert {"conversation_created", "audio_chunk", "error", "warning", "tool_call"} <= sent
    for message in sorted(sent | CLIENT_MESSAGE_TYPES):
        assert f"| `{message}` |" in text, message


def test_gitignore_ignores_default_key_directory() -> None:
    """docs/jwt.md writes the private key to ./parley-keys: git must never pick it up."""
    import subprocess

    result = subprocess.run(
        ["git", "check-ignore", "--no-index", "parley-keys/private_key.pem"],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("package", ["api", "web"])
def test_architecture_names_every_module_of_the_http_layer(package: str) -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    modules = sorted((ROOT / "src" / "parley" / package).glob("*.py"))
    missing = [m.name for m in modules if m.name != "__init__.py" and f"`{m.name}`" not in text]
    assert missing == []


def test_readme_documentation_list_names_every_doc() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^- \[[^\]]+\]\((docs/[^)#]+\.md)\)", section, re.M))
    assert listed, "no Documentation list in README.md"
    present = {f"docs/{path.name}" for path in ROOT.glob("docs/*.md")}
    assert sorted(present - listed) == []
