"""docs/architecture.md, the map a newcomer reads first, stays true to the code.

- its layer table places every top-level module of `parley` in exactly one row;
- each row's "may import" column names exactly the parts of `parley` the row's modules
  import (every one imported is listed, every one listed is imported), and the libraries it
  names are imported; nothing its "never imports" column names is imported;
- every file the page names exists (and the function or class it names in that file), every
  dotted name under `parley` it names resolves, and every command of `parley` is listed.

Imports are read by grimp (what import-linter reads): direct imports, annotations-only
(`TYPE_CHECKING`) and function-level ones included; a parenthesis in a cell is a comment.
"""

from __future__ import annotations

import ast
import functools
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import grimp
import typer

import parley.cli

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "parley"
DOC = ROOT / "docs" / "architecture.md"
HEADER = "| layer | package | modules | may import | never imports |"
CODE = re.compile(r"`([^`]+)`")
PARENTHESIS = re.compile(r"\([^()]*\)")
FILE = re.compile(r"^(?P<path>[\w.*/-]+(?:\.py|/))(?:(?:::|: )(?P<name>\w+))?$")
DOTTED = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


@dataclass(frozen=True)
class Row:
    """One row of the layer table."""

    layer: str
    packages: tuple[str, ...]  # parley.cli, parley.app, …
    modules_cell: str
    may: tuple[str, ...]
    never: tuple[str, ...]


def code_names(cell: str) -> tuple[str, ...]:
    """The backquoted names of a cell, outside its parentheses."""
    while PARENTHESIS.search(cell):
        cell = PARENTHESIS.sub("", cell)
    return tuple(CODE.findall(cell))


def module_of(package_cell_name: str) -> str:
    """`cli/` -> parley.cli, `app.py` -> parley.app, `__main__.py` -> parley.__main__."""
    name = package_cell_name.removesuffix("/").removesuffix(".py")
    assert re.fullmatch(r"\w+", name), package_cell_name
    return f"parley.{name}"


@functools.cache
def doc_text() -> str:
    """The page without its fenced blocks (a diagram, a Protocol's signatures)."""
    return FENCE.sub("", DOC.read_text(encoding="utf-8"))


def code_spans(text: str) -> list[str]:
    """Every backquoted span of `text`; a span may wrap onto the next line."""
    return [" ".join(span.split()) for span in CODE.findall(text)]


@functools.cache
def rows() -> tuple[Row, ...]:
    lines = doc_text().splitlines()
    assert HEADER in lines, "the layer table's header changed"
    found: list[Row] = []
    for line in lines[lines.index(HEADER) + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        assert len(cells) == 5, f"a row with {len(cells)} cells: {line[:80]}"
        layer, packages, modules, may, never = cells
        found.append(
            Row(
                layer=layer,
                packages=tuple(module_of(name) for name in CODE.findall(packages)),
                modules_cell=modules,
                may=code_names(may),
                never=code_names(never),
            )
        )
    assert len(found) >= 10
    return tuple(found)


@functools.cache
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("parley", include_external_packages=True)


def modules_of(row: Row) -> set[str]:
    found: set[str] = set()
    for package in row.packages:
        found |= {package, *graph().find_descendants(package)}
    return found


def imported_by(row: Row) -> set[str]:
    """What the row's modules import directly, outside the row (parley's root excluded)."""
    inside = modules_of(row)
    found = {
        imported
        for module in inside
        for imported in graph().find_modules_directly_imported_by(module)
    }
    return found - inside - {"parley"}


def internal(name: str) -> str | None:
    """`stores.probe` -> parley.stores.probe when that is a module of parley."""
    module = f"parley.{name}"
    return module if module in graph().modules else None


def covers(entry: str, module: str) -> bool:
    return module == entry or module.startswith(entry + ".")


def test_architecture_doc_table_places_every_top_level_module_once() -> None:
    placed = [package for row in rows() for package in row.packages]
    assert sorted(placed) == sorted(set(placed)), "a module placed in two rows"
    top_level = set(graph().find_children("parley"))
    assert "parley.wires" in top_level
    assert sorted(set(placed) ^ top_level) == []


def test_architecture_doc_may_import_lists_exactly_what_each_layer_imports() -> None:
    problems: list[str] = []
    for row in rows():
        imported = imported_by(row)
        internal_imports = {module for module in imported if module.startswith("parley.")}
        listed: list[str] = []
        for name in row.may:
            module = internal(name)
            if module is not None:
                listed.append(module)
            elif name not in imported:  # a library: the row must import it
                problems.append(f"{row.layer}: lists `{name}`, which it does not import")
        for module in sorted(internal_imports):
            if not any(covers(entry, module) for entry in listed):
                problems.append(f"{row.layer}: imports {module}, not in its may-import list")
        for entry in listed:
            if not any(covers(entry, module) for module in internal_imports):
                problems.append(f"{row.layer}: lists {entry}, which it does not import")
    assert problems == []


def test_architecture_doc_never_imports_holds() -> None:
    problems: list[str] = []
    for row in rows():
        imported = imported_by(row)
        for name in row.never:
            entry = internal(name) or name
            if entry not in graph().modules:
                problems.append(f"{row.layer}: never-imports names unknown `{name}`")
            found = sorted(module for module in imported if covers(entry, module))
            problems += [
                f"{row.layer}: imports {module}, which it never should" for module in found
            ]
    assert problems == []


def defines(path: Path, name: str) -> bool:
    """Whether the module at `path` defines `name` at its top level."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(target, ast.Name) and target.id == name for target in targets):
                return True
    return False


def resolve_file(path: str, bases: list[Path]) -> list[Path]:
    """The files `path` names (a glob for `*`), first under `bases`, else anywhere in the
    source and the tests whose path ends with it."""
    for base in bases:
        found = sorted(base.glob(path)) if "*" in path else [base / path]
        found = [candidate for candidate in found if candidate.exists()]
        if found:
            return found
    if "*" in path:
        return []
    suffix = "/" + path.removesuffix("/")
    return [
        candidate
        for tree in (SOURCE, ROOT / "tests")
        for candidate in tree.rglob(Path(path.removesuffix("/")).name)
        if candidate.as_posix().endswith(suffix)
    ]


def test_architecture_doc_names_only_files_that_exist() -> None:
    row_bases = {
        line: [SOURCE / package.removeprefix("parley.") for package in row.packages]
        for row in rows()
        for line in doc_text().splitlines()
        if line.startswith(f"| {row.layer} |")
    }
    prose = "\n".join(line for line in doc_text().splitlines() if line not in row_bases)
    places = [(code_spans(prose), [SOURCE, ROOT])]
    places += [(code_spans(line), [*bases, SOURCE, ROOT]) for line, bases in row_bases.items()]
    checked = 0
    missing: list[str] = []
    for tokens, bases in places:
        for token in tokens:
            named = FILE.match(token)
            if named is None or named["path"].startswith(("/", ".")):
                continue  # not a file: a URL path (`/examples/`)
            found = resolve_file(named["path"], bases)
            checked += 1
            if not found:
                missing.append(token)
            elif named["name"] and not any(defines(path, named["name"]) for path in found):
                missing.append(f"{token} (no {named['name']} there)")
    assert checked > 100
    assert missing == []


def resolves(dotted: str) -> bool:
    """Whether `services.authn.authenticate` (under parley) names a module or attribute."""
    parts = dotted.removeprefix("parley.").split(".")
    for split in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module("parley." + ".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            if not hasattr(value, attribute):
                return False
            value = getattr(value, attribute)
        return True
    return False


def test_architecture_doc_dotted_names_resolve() -> None:
    top_level = {module.removeprefix("parley.") for module in graph().find_children("parley")}
    checked = 0
    unresolved: list[str] = []
    for token in code_spans(doc_text()):
        name = re.sub(r"\(.*\)$", "", token)
        if not DOTTED.match(name) or name.endswith(".py"):
            continue
        if name.removeprefix("parley.").split(".")[0] not in top_level:
            continue
        checked += 1
        if not resolves(name):
            unresolved.append(token)
    assert checked > 20
    assert unresolved == []


def test_architecture_doc_lists_every_command() -> None:
    app = parley.cli.app
    assert isinstance(app, typer.Typer)
    names = [command.name for command in app.registered_commands]
    names += [group.name for group in app.registered_groups]
    assert {"serve", "migrate", "audit", "webhook-sender"} <= set(names)
    entry = next(row for row in rows() if "parley.cli" in row.packages)
    assert [name for name in names if f"`{name}`" not in entry.modules_cell] == []
