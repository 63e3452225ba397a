"""Check a raw JSON answer against an official SDK response type (API.md section 17).

The SDK's models are lenient (`UncheckedBaseModel` accepts anything and leaves a missing
member `None`), so parsing alone proves nothing. `shape_errors` walks the type instead:
every member the type marks required is present (under its wire name) and, unless it is
`null`, of the JSON kind the type names, and, where the type is a closed `Literal`, one of
its values; lists, maps, nested models and unions are walked in turn (a union holds when one
of its members does). A required member may be `null` where Parley has no value for it
(API.md section 17: present, "with the value that says what Parley does"; a cap that is not
set, a feature that is off): the SDK's models read `null` as `None`.
"""

from __future__ import annotations

import datetime as dt
import types
import typing
from typing import Any

import pydantic

_SCALARS: dict[type, tuple[type, ...]] = {
    str: (str,),
    int: (int,),
    float: (int, float),
    bool: (bool,),
    dt.datetime: (str,),
    dt.date: (str,),
}


def shape_errors(annotation: Any, value: Any, path: str = "$") -> list[str]:
    """Every way `value` (parsed JSON) falls short of `annotation`; empty when it fits."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any or annotation is object:
        return []
    if origin is typing.Annotated:
        return shape_errors(args[0], value, path)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return []
        options = [shape_errors(arg, value, path) for arg in args if arg is not type(None)]
        if any(not errors for errors in options):
            return []
        return min(options, key=len)
    if value is None:
        return []  # present: see the module's docstring
    if origin is typing.Literal:
        return [] if value in args else [f"{path}: {value!r} is not one of {list(args)}"]
    if origin in (list, typing.List, typing.Sequence):  # noqa: UP006 - what Fern writes
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__} where a list is required"]
        return [
            e for i, item in enumerate(value) for e in shape_errors(args[0], item, f"{path}[{i}]")
        ]
    if origin in (dict, typing.Dict, typing.Mapping):  # noqa: UP006 - what Fern writes
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__} where an object is required"]
        inner = args[1] if len(args) == 2 else Any
        return [e for k, item in value.items() for e in shape_errors(inner, item, f"{path}.{k}")]
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return _model_errors(annotation, value, path)
    if isinstance(annotation, type) and annotation in _SCALARS:
        fits = isinstance(value, _SCALARS[annotation]) and not (
            annotation is not bool and isinstance(value, bool)
        )
        return [] if fits else [f"{path}: {value!r} is not a {annotation.__name__}"]
    return []  # a type this checker does not know (e.g. the SDK's open `Any` enums)


def _model_errors(model: type[pydantic.BaseModel], value: Any, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: {type(value).__name__} where {model.__name__} (an object) is required"]
    errors: list[str] = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        where = f"{path}.{key}"
        if key not in value:
            if info.is_required():
                errors.append(f"{where}: missing ({model.__name__} requires it)")
            continue
        errors.extend(shape_errors(info.annotation, value[key], where))
    return errors
