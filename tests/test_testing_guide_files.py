"""docs/testing-an-agent.md and its files in examples/testing/ stay in step: the guide shows
the files as they are, and the GitHub Actions workflow parses and names only commands,
options, endpoints and files that exist. (The example is run against a real server by
tests/e2e/test_testing_guide.py.)"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml

from parley.app import create_app
from parley.cli import app as cli_app
from parley.config import Settings

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "testing-an-agent.md").read_text(encoding="utf-8")
EXAMPLES = ROOT / "examples" / "testing"
WORKFLOW = EXAMPLES / "agent-tests.yml"
SHELL_WORDS = frozenset({"do", "done", "break"})
SYSTEM = frozenset({"curl", "python3", "echo", "seq", "sleep"})
"""Programs of the runner's system (checked to exist here too)."""
TEST_RUN = re.compile(r"^parley test run (.*)$", re.M)
"""The guide's signature of `parley test run` (API.md section 19), in its own block."""


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)\n```$", GUIDE, re.M | re.S)


def commands() -> list[list[str]]:
    """Every simple command of the workflow's `run` steps, as words: split at the shell's
    operators, without redirections' targets, assignments and loop keywords."""
    workflow = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    found: list[list[str]] = []
    for step in workflow["jobs"]["agent-tests"]["steps"]:
        for line in step.get("run", "").splitlines():
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            current: list[str] = []
            redirected = False
            for word in lexer:
                if set(word) <= set("();<>|&"):
                    found.append(current)
                    current, redirected = [], ">" in word
                elif redirected:
                    redirected = False  # the redirection's target, not a command
                elif not (current == [] and (word in SHELL_WORDS or word.endswith("=$"))):
                    current.append(word)
            found.append(current)
    return [words for words in found if words and words[0] != "for" and not words[0].isdigit()]


def parley_command(words: list[str]) -> tuple[list[str], list[str]]:
    """A `parley` command line's command path and its options."""
    path = [word for word in words[1:] if not word.startswith("-")]
    options = [word.split("=")[0] for word in words[1:] if word.startswith("--")]
    return path, options


def cli_command(path: list[str]) -> Any:
    """The CLI's command at `path` (the words after it are its arguments); None if absent."""
    command: Any = typer.main.get_command(cli_app)
    for name in path:
        if not hasattr(command, "commands"):  # a command, not a group: `name` is an argument
            return command
        command = command.commands.get(name)
        if command is None:
            return None
    return command


def test_testing_guide_shows_the_example_files_as_they_are() -> None:
    shown = [json.loads(block) for block in blocks("json") if block.startswith(("[", "{\n"))]
    assert json.loads((EXAMPLES / "scenarios.json").read_text(encoding="utf-8")) in shown
    assert json.loads((EXAMPLES / "agent.json").read_text(encoding="utf-8")) in shown
    assert WORKFLOW.read_text(encoding="utf-8").rstrip("\n") in blocks("yaml")


def test_ci_workflow_parses_as_a_github_actions_job() -> None:
    workflow: dict[Any, Any] = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert workflow[True] == ["push", "pull_request"]  # YAML 1.1 reads the key `on` as True
    job = workflow["jobs"]["agent-tests"]
    assert job["runs-on"] == "ubuntu-latest"
    for step in job["steps"]:
        assert ("uses" in step) != ("run" in step), step
    runs = " ".join(step.get("run", "") for step in job["steps"])
    assert "parley serve" in runs
    assert "parley test run" in runs
    assert "--junit" in runs


@pytest.mark.parametrize("words", commands(), ids=lambda words: " ".join(words[:3]))
def test_ci_workflow_names_only_commands_and_files_that_exist(words: list[str]) -> None:
    program = words[0]
    if program == ".venv/bin/parley":
        path, options = parley_command(words)
        command = cli_command(path)
        assert command is not None, f"no command parley {' '.join(path)}"
        known = {flag for param in command.params for flag in getattr(param, "opts", [])}
        assert set(options) <= known, (options, known)
    elif program in ("scripts/install", ".venv/bin/python"):
        script = ROOT / words[0] if program == "scripts/install" else ROOT / words[1]
        assert script.exists(), words
        for word in words[1:]:
            if word.startswith(("examples/", "scripts/")):
                assert (ROOT / word).exists(), word
            elif word.startswith("--"):
                assert word in script.read_text(encoding="utf-8"), (word, script)
    elif program == "curl":
        for word in words[1:]:
            if word.startswith("@"):
                assert (ROOT / word[1:]).exists(), word
            elif word.startswith("http://127.0.0.1:8000"):
                route = word.removeprefix("http://127.0.0.1:8000")
                assert route in served_paths(), route
    else:
        assert program in SYSTEM, words
        assert shutil.which(program) is not None, program


def test_ci_workflow_key_step_uses_an_existing_cli_command() -> None:
    """The API key for the job is made by `parley api-keys create --org default --json`."""
    text = WORKFLOW.read_text(encoding="utf-8")
    (line,) = re.findall(r"\$\((\.venv/bin/parley [^|]*)\|", text)
    path, options = parley_command(shlex.split(line))
    command = cli_command(path)
    assert command is not None
    known = {flag for param in command.params for flag in getattr(param, "opts", [])}
    assert set(options) <= known


def served_paths() -> set[str]:
    app = create_app(Settings(database_url="sqlite:///unused.db"))
    return {*app.openapi()["paths"], "/health"}
