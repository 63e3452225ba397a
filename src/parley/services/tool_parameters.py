"""A tool's `parameters` (API.md section 12): the two accepted forms and the model's view.

Forms, stored and returned as given:

1. a JSON Schema object: `{"type": "object", "properties": {name: schema}, "required"?:
   [name], "additionalProperties"?: false, "description"?: str}`. A property's schema may use
   `type` (`string`, `integer`, `number`, `boolean`, `null`, `array`, `object`, or a list of
   them), `description`, `enum` (a list of strings, numbers, booleans or null), `items`,
   `properties`, `required`, `additionalProperties` (false), `anyOf` and `default`. Objects
   and arrays nest at most `MAX_DEPTH` levels below the top-level object.
2. the official SDK's flat list: `[{"type": "string"|"integer"|"number"|"boolean"|"array"|
   "enum", "name", "description", "is_required", "item_type"? (arrays only, required for
   them), "enum_values"? (enums only, required for them), "location"? (webhook tools only)}]`.

Anything else is refused with ValidationFailed naming the path (`parameters`,
`parameters.properties.city.type`, `parameters[2].item_type`, ...).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any, Final, NoReturn

from parley.errors import ValidationFailed

MAX_DEPTH: Final = 5
MAX_PARAMETERS: Final = 100
JSON_TYPES: Final = frozenset({"string", "integer", "number", "boolean", "null", "array", "object"})
FLAT_TYPES: Final = frozenset({"string", "integer", "number", "boolean", "array", "enum"})
ITEM_TYPES: Final = frozenset({"string", "integer", "number", "boolean"})
LOCATIONS: Final = frozenset({"request_body", "query_string", "url_path"})
RESERVED_NAMES: Final = frozenset({"conversation_id"})
"""Sent by the service itself with every webhook call (API.md section 12)."""
PARAMETER_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
NAME_RULE: Final = "must be 1-64 characters of letters, digits, '_' and '-', not starting with '-'"
_TOP_KEYS: Final = frozenset(
    {"type", "properties", "required", "additionalProperties", "description"}
)
_SCHEMA_KEYS: Final = _TOP_KEYS | {"enum", "items", "anyOf", "default"}
_FLAT_KEYS: Final = frozenset(
    {"type", "name", "description", "is_required", "item_type", "enum_values", "location"}
)


def is_flat(parameters: Any) -> bool:
    """Tell whether `parameters` is in the SDK's flat-list form."""
    return isinstance(parameters, list)


def check_parameters(parameters: Any, *, webhook: bool) -> None:
    """Refuse parameters in neither form (400 naming the path); see the module docstring."""
    if isinstance(parameters, list):
        _check_flat(parameters, webhook=webhook)
    elif isinstance(parameters, dict):
        _check_top(parameters)
    else:
        _refuse("parameters", "must be a JSON Schema object or a list of parameters")


def top_level_names(parameters: Any) -> list[str]:
    """The names of the top-level parameters (checked parameters only)."""
    if isinstance(parameters, list):
        return [item["name"] for item in parameters]
    return list(parameters.get("properties", {}))


def required_names(parameters: Any) -> set[str]:
    if isinstance(parameters, list):
        return {item["name"] for item in parameters if item["is_required"]}
    return set(parameters.get("required", ()))


def model_schema(parameters: Any) -> dict[str, Any]:
    """Return the JSON Schema the language model sees, for either form.

    A JSON Schema object is returned as given (a copy); a flat list becomes an object schema
    with one property per parameter (`enum` as a string with `enum`, `array` with `items`),
    its `required` names, and no other properties. `location` is the webhook's business and
    is not shown to the model.
    """
    if not isinstance(parameters, list):
        return copy.deepcopy(dict(parameters))
    properties: dict[str, Any] = {}
    for item in parameters:
        prop: dict[str, Any]
        if item["type"] == "enum":
            prop = {"type": "string", "enum": list(item["enum_values"])}
        elif item["type"] == "array":
            prop = {"type": "array", "items": {"type": item["item_type"]}}
        else:
            prop = {"type": item["type"]}
        if item.get("description"):
            prop["description"] = item["description"]
        properties[item["name"]] = prop
    return {
        "type": "object",
        "properties": properties,
        "required": [item["name"] for item in parameters if item["is_required"]],
        "additionalProperties": False,
    }


def locations(
    parameters: Any, parameter_locations: Mapping[str, str] | None, *, method: str
) -> dict[str, str]:
    """Where each top-level parameter goes in a webhook call: given, else the method's
    default (`request_body` for POST, `query_string` for GET)."""
    default = "query_string" if method == "GET" else "request_body"
    if isinstance(parameters, list):
        return {item["name"]: item.get("location") or default for item in parameters}
    given = parameter_locations or {}
    return {name: given.get(name, default) for name in parameters.get("properties", {})}


def _check_flat(items: list[Any], *, webhook: bool) -> None:
    if len(items) > MAX_PARAMETERS:
        _refuse("parameters", f"must have at most {MAX_PARAMETERS} parameters")
    seen: set[str] = set()
    for index, item in enumerate(items):
        path = f"parameters[{index}]"
        if not isinstance(item, dict):
            _refuse(path, "must be an object")
        if unknown := sorted(set(item) - _FLAT_KEYS):
            _refuse(f"{path}.{unknown[0]}", "is not a member of a parameter")
        for key in ("type", "name", "description", "is_required"):
            if key not in item:
                _refuse(f"{path}.{key}", "is required")
        if item["type"] not in FLAT_TYPES:
            _refuse(f"{path}.type", "must be one of " + ", ".join(sorted(FLAT_TYPES)))
        _check_name(item["name"], f"{path}.name")
        if item["name"] in seen:
            _refuse(f"{path}.name", "repeats another parameter's name")
        seen.add(item["name"])
        if not isinstance(item["description"], str):
            _refuse(f"{path}.description", "must be a string")
        if not isinstance(item["is_required"], bool):
            _refuse(f"{path}.is_required", "must be a boolean")
        _check_flat_extras(item, path, webhook=webhook)


def _check_flat_extras(item: dict[str, Any], path: str, *, webhook: bool) -> None:
    item_type = item.get("item_type")
    if item["type"] == "array":
        if item_type not in ITEM_TYPES:
            _refuse(f"{path}.item_type", "must be one of " + ", ".join(sorted(ITEM_TYPES)))
    elif item_type is not None:
        _refuse(f"{path}.item_type", "is only for parameters of type array")
    values = item.get("enum_values")
    if item["type"] == "enum":
        if not isinstance(values, list) or not values:
            _refuse(f"{path}.enum_values", "must be a non-empty list of strings")
        if not all(isinstance(v, str) and v for v in values) or len(set(values)) != len(values):
            _refuse(f"{path}.enum_values", "must be distinct non-empty strings")
    elif values is not None:
        _refuse(f"{path}.enum_values", "is only for parameters of type enum")
    location = item.get("location")
    if location is not None:
        if not webhook:
            _refuse(f"{path}.location", "is only for custom_webhook tools")
        if location not in LOCATIONS:
            _refuse(f"{path}.location", "must be one of " + ", ".join(sorted(LOCATIONS)))


def _check_top(schema: dict[str, Any]) -> None:
    if schema.get("type") != "object":
        _refuse("parameters.type", 'must be "object"')
    if unknown := sorted(set(schema) - _TOP_KEYS):
        _refuse(f"parameters.{unknown[0]}", "is not supported at the top level")
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        _refuse("parameters.properties", "must be an object of parameter schemas")
    if len(properties) > MAX_PARAMETERS:
        _refuse("parameters.properties", f"must have at most {MAX_PARAMETERS} parameters")
    for name in properties:
        _check_name(name, f"parameters.properties.{name}")
    _check_object_members(schema, "parameters", depth=0)


def _check_object_members(schema: dict[str, Any], path: str, *, depth: int) -> None:
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        _refuse(f"{path}.properties", "must be an object of schemas")
    for name, prop in properties.items():
        if not isinstance(name, str) or not name:
            _refuse(f"{path}.properties", "names must be non-empty strings")
        _check_schema(prop, f"{path}.properties.{name}", depth=depth)
    required = schema.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(name in properties for name in required)
    ):
        _refuse(f"{path}.required", "must list names defined in properties")
    if "additionalProperties" in schema and schema["additionalProperties"] is not False:
        _refuse(f"{path}.additionalProperties", "must be false")
    if "description" in schema and not isinstance(schema["description"], str):
        _refuse(f"{path}.description", "must be a string")


def _check_schema(schema: Any, path: str, *, depth: int) -> None:
    if not isinstance(schema, dict):
        _refuse(path, "must be a JSON Schema object")
    if unknown := sorted(set(schema) - _SCHEMA_KEYS):
        _refuse(f"{path}.{unknown[0]}", "is not a supported JSON Schema keyword")
    types = schema.get("type")
    listed = types if isinstance(types, list) else [types] if types is not None else []
    if not listed and "anyOf" not in schema and "enum" not in schema:
        _refuse(f"{path}.type", "is required (or anyOf, or enum)")
    if not all(isinstance(t, str) and t in JSON_TYPES for t in listed):
        _refuse(f"{path}.type", "must be one of " + ", ".join(sorted(JSON_TYPES)))
    nested = bool({"object", "array"} & set(listed)) or "items" in schema or "properties" in schema
    level = depth + 1 if nested else depth
    if level > MAX_DEPTH:
        _refuse(path, f"nests objects and arrays more than {MAX_DEPTH} levels deep")
    if "enum" in schema and (
        not isinstance(schema["enum"], list)
        or not schema["enum"]
        or not all(v is None or isinstance(v, str | int | float | bool) for v in schema["enum"])
    ):
        _refuse(f"{path}.enum", "must be a non-empty list of strings, numbers, booleans or null")
    if "items" in schema:
        _check_schema(schema["items"], f"{path}.items", depth=level)
    if "properties" in schema or "required" in schema or "additionalProperties" in schema:
        _check_object_members(schema, path, depth=level)
    elif "description" in schema and not isinstance(schema["description"], str):
        _refuse(f"{path}.description", "must be a string")
    if "anyOf" in schema:
        variants = schema["anyOf"]
        if not isinstance(variants, list) or not variants:
            _refuse(f"{path}.anyOf", "must be a non-empty list of schemas")
        for index, variant in enumerate(variants):
            _check_schema(variant, f"{path}.anyOf[{index}]", depth=depth)


def _check_name(name: Any, path: str) -> None:
    if not isinstance(name, str) or not PARAMETER_NAME.fullmatch(name):
        _refuse(path, NAME_RULE)
    if name in RESERVED_NAMES:
        _refuse(path, "is reserved: the service sends it with every webhook call")


def _refuse(path: str, message: str) -> NoReturn:
    raise ValidationFailed(param_errors={path: message})
