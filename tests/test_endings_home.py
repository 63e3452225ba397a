"""A conversation ends in one place (services/endings.py): no other module decides an
`ended_by` or writes `status` `ended`, and no module names a WebSocket close code by its
number. Read from the source (the AST), so a new ender elsewhere fails here."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import get_args

from parley.api import schemas
from parley.records import EndedBy

SRC = Path(__file__).resolve().parents[1] / "src" / "parley"
HOME = SRC / "services" / "endings.py"
STORES_THE_TRANSITION = SRC / "db" / "repos" / "conversations.py"
"""The repository that stores the transition it is told (`end`, guarded)."""
CLOSE_CODES = range(1000, 5000)
CLOSERS = {"close", "send_close", "end", "Closing", "Ending"}


def modules() -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(SRC.rglob("*.py")):
        if path != HOME and "migrations" not in path.parts:
            yield path, ast.parse(path.read_text(encoding="utf-8"))


def _names(node: ast.expr) -> str:
    """`Status.ENDED` -> "Status.ENDED" (a member of the lifecycle's enums); a string
    constant -> its value; else "" (a name, a column read back)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in {"Status", "EndedBy"}
    ):
        return f"{node.value.id}.{node.attr}"
    return ""


def _decides_an_ending(node: ast.keyword) -> bool:
    value = _names(node.value)
    if node.arg == "ended_by":
        return bool(value)  # a literal or an EndedBy member: decided here
    return node.arg == "status" and value in {"ended", "Status.ENDED"}


def _close_code(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int and node.value in CLOSE_CODES


def test_only_the_endings_home_decides_ended_by_or_writes_status_ended() -> None:
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and _decides_an_ending(node):
                if path == STORES_THE_TRANSITION and node.arg == "status":
                    continue  # conversation_repo.end stores the transition it is told
                found.append(f"{path.relative_to(SRC)}:{node.value.lineno} {ast.unparse(node)}")
    assert found == []


def test_no_close_code_by_its_number_outside_the_endings_home() -> None:
    found = []
    for path, tree in modules():
        for node in ast.walk(tree):
            numbers: list[ast.expr] = []
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if name in CLOSERS:
                    numbers = list(node.args)
            elif isinstance(node, ast.Tuple) and len(node.elts) == 2:
                code, reason = node.elts
                if isinstance(reason, ast.Constant) and isinstance(reason.value, str):
                    numbers = [code]  # a (code, reason) pair
            elif isinstance(node, ast.Compare) and "code" in ast.unparse(node.left).lower():
                numbers = list(node.comparators)
            found += [
                f"{path.relative_to(SRC)}:{each.lineno} {ast.unparse(node)}"
                for each in numbers
                if _close_code(each)
            ]
    assert found == []


def test_the_api_shows_every_ended_by_of_the_lifecycle() -> None:
    assert set(get_args(schemas.EndedBy)) == {str(each) for each in EndedBy}
