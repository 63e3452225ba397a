"""Importing the JWT kernel or the services loads no Redis client (issue #11: `parley.stores`
exports only its Protocols; the composition root picks the implementations), and services see
records, never table rows."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
import tomllib
import typing
from pathlib import Path
from types import ModuleType

import grimp

import parley.api
import parley.db.repos
import parley.services
from parley.db.tables import Base


def loaded_after(*modules: str) -> set[str]:
    code = (
        f"import sys; import {', '.join(modules)}; "
        "print(' '.join(m for m in sys.modules if m.split('.')[0] in ('redis', 'parley')))"
    )
    run = subprocess.run(  # noqa: S603 - this interpreter, fixed code
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return set(run.stdout.split())


def test_imports_jwt_kernel_loads_no_redis() -> None:
    loaded = loaded_after("parley.jwt", "parley.jwt.mint", "parley.stores")
    assert "redis" not in loaded
    assert "parley.stores.redis" not in loaded


def test_imports_services_load_no_store_implementation() -> None:
    loaded = loaded_after("parley.services.authn", "parley.services.conversations")
    assert not {"redis", "parley.stores.redis", "parley.stores.memory"} & loaded


def service_modules() -> list[ModuleType]:
    prefix = parley.services.__name__ + "."
    names = [info.name for info in pkgutil.walk_packages(parley.services.__path__, prefix)]
    return [parley.services, *(importlib.import_module(name) for name in names)]


def test_services_never_see_table_rows() -> None:
    """Repositories hand services records; a row class reaching a service by any path (a
    repository's re-export, an alias, an attribute) fails here. import-linter cannot see it:
    its contract forbids importing `parley.db.tables` by that name only."""
    rows = {mapper.class_.__name__ for mapper in Base.registry.mappers}
    assert "AgentRow" in rows
    found: list[str] = []
    for module in service_modules():
        found += [
            f"{module.__name__}.{name}"
            for name, value in vars(module).items()
            if isinstance(value, type) and issubclass(value, Base)
        ]
        for node in ast.walk(ast.parse(inspect.getsource(module))):
            if isinstance(node, ast.ImportFrom):
                found += [
                    f"{module.__name__}: import {a.name}" for a in node.names if a.name in rows
                ]
            elif isinstance(node, ast.Attribute) and node.attr in rows:
                found.append(f"{module.__name__}:{node.lineno}: .{node.attr}")
    assert found == []


def mentioned_types(hint: object) -> list[type]:
    """The classes a type hint names, inside unions and generics."""
    found = [hint] if isinstance(hint, type) else []
    for arg in typing.get_args(hint):
        found += mentioned_types(arg)
    origin = typing.get_origin(hint)
    return [*found, origin] if isinstance(origin, type) else found


def repository_modules() -> list[ModuleType]:
    prefix = parley.db.repos.__name__ + "."
    names = [info.name for info in pkgutil.walk_packages(parley.db.repos.__path__, prefix)]
    return [importlib.import_module(name) for name in names]


def test_repositories_return_records() -> None:
    """No public repository function is annotated to return a table row: services get
    records, and row changes stay in the repository, by ID."""
    modules = repository_modules()
    assert "parley.db.repos.conversations" in {module.__name__ for module in modules}
    found: list[str] = []
    for module in modules:
        for name, value in vars(module).items():
            if name.startswith("_") or not inspect.isfunction(value):
                continue
            if value.__module__ != module.__name__:
                continue
            returned = typing.get_type_hints(value).get("return")
            found += [
                f"{module.__name__}.{name} -> {kind.__name__}"
                for kind in mentioned_types(returned)
                if issubclass(kind, Base)
            ]
    assert found == []


INDIRECT_ALLOWED = {
    "The HTTP layer authenticates through services/authn.py alone",
    "HTTP layer never touches persistence libraries",
    "The command line reaches the HTTP layer only through app",
    "The dashboard uses the services, like the API, and nothing below them",
    "Services leave SQL to the repositories",
}
"""The forbidden contracts whose rule legitimately holds through a module in between."""


def test_import_contracts_refuse_indirect_imports_except_the_listed() -> None:
    """Each exception is a decision, made here and explained in a comment beside it."""
    root = Path(__file__).resolve().parents[1]
    text = (root / "pyproject.toml").read_text(encoding="utf-8")
    contracts = tomllib.loads(text)["tool"]["importlinter"]["contracts"]
    allowed = {c["name"] for c in contracts if c.get("allow_indirect_imports", False)}
    assert allowed == INDIRECT_ALLOWED
    lines = text.splitlines()
    for number, line in enumerate(lines):
        if line.replace(" ", "") == "allow_indirect_imports=true":
            assert lines[number - 1].startswith("# Indirect imports allowed:")


def test_services_import_one_another_without_circles_counting_annotations() -> None:
    """The services' acyclic contract stays, over all of parley.services, and counts the
    imports made for annotations only (the Context knot of issue #21 was made of them)."""
    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    linter = config["tool"]["importlinter"]
    acyclic = [c for c in linter["contracts"] if c["type"] == "acyclic_siblings"]
    assert [c["ancestors"] for c in acyclic] == [["parley.services"]]
    assert not linter.get("exclude_type_checking_imports", False)
    assert "depth" not in acyclic[0]  # the default (10) reaches services/live's modules


def test_wires_import_of_the_services_only_the_codec_seam() -> None:
    """A wire turns frames into the session's events (`services/live/codec.py`) and back; it
    calls no use case, and no module of the session's package reaches a wire, by any path."""
    graph = grimp.build_graph("parley")
    wires = graph.find_descendants("parley.wires")
    assert {"parley.wires.parley_codec", "parley.wires.twilio_codec"} <= wires
    services = {
        imported
        for wire in wires
        for imported in graph.find_modules_directly_imported_by(wire)
        if imported.startswith("parley.services")
    }
    assert services == {"parley.services.live.codec"}
    session = graph.find_descendants("parley.services.live") | {"parley.services.live"}
    reached = [
        f"{module} -> {wire}"
        for module in sorted(session)
        for wire in sorted(wires)
        if graph.chain_exists(importer=module, imported=wire)
    ]
    assert reached == []


CREDENTIAL_CHECKS = frozenset(
    {
        "compare_digest",  # hmac: a secret compared
        "signature_matches",  # services/twilio_signature.py: the carrier's signature
        "redeem_stream_token",  # services/telephony.py: a media stream's token
        "hash_secret",  # credentials.py: an opaque credential's look-up key
        "find_by_secret",  # services/api_keys.py
        "find_active",  # services/session_tokens.py
        "find_superseded",  # services/api_keys.py: a rotated key's replaced secret
        "redeem_conversation_token",  # services/conversation_tokens.py
    }
)
"""What proves a credential; services/authn.py calls them, the HTTP layer never does."""


def test_http_layer_authenticates_only_through_authn() -> None:
    """REST, both sockets, the carrier's webhook and /metrics authenticate through
    services/authn.py: no module of parley.api names a check of its own (import-linter's
    contract sees the imports; this sees an attribute reached through a service module)."""
    package = Path(parley.api.__file__).parent
    modules = sorted(package.rglob("*.py"))
    assert package / "metrics.py" in modules
    assert package / "routes" / "telephony.py" in modules
    found: list[str] = []
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Attribute):
                names = [node.attr]
            elif isinstance(node, ast.Name):
                names = [node.id]
            elif isinstance(node, ast.ImportFrom):
                names = [alias.name for alias in node.names]
            found += [
                f"{path.relative_to(package)}:{getattr(node, 'lineno', 0)}: {name}"
                for name in names
                if name in CREDENTIAL_CHECKS
            ]
    assert found == []
