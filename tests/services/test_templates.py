"""Template placeholders (services/templates.py; API.md section 12)."""

from __future__ import annotations

import pytest

from parley.errors import MissingTemplateVariable
from parley.services.templates import is_variable_name, placeholders, render


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("Hello {{name}}", {"name"}),
        ("Hello {{ name }} and {{  other_2 }}", {"name", "other_2"}),
        ("{{_x}}{{x}}{{x}}", {"_x", "x"}),
        ("{{ two words }} {{1x}} {{}} {name} {{ name", set()),
        ("{{\tname}}", set()),
    ],
    ids=["plain", "spaces", "repeats", "not-placeholders", "tab-not-a-space"],
)
def test_placeholders_follow_the_documented_syntax(text: str, names: set[str]) -> None:
    assert placeholders(text) == names


def test_render_prefers_values_over_defaults() -> None:
    text = "Hi {{ name }}, welcome to {{shop}}."
    rendered = render(text, values={"name": "Ada"}, defaults={"name": "you", "shop": "Parley"})
    assert rendered == "Hi Ada, welcome to Parley."


def test_render_values_are_plain_text_not_substituted_again() -> None:
    rendered = render("{{a}}", values={"a": "{{b}}"}, defaults={"b": "no"})
    assert rendered == "{{b}}"


def test_render_missing_variable_raises_missing_template_variable() -> None:
    with pytest.raises(MissingTemplateVariable) as raised:
        render("{{a}} {{b}}", values={"a": "1"}, defaults={})
    assert raised.value.code == "missing_template_variable"
    assert "'b'" in raised.value.message


def test_render_leaves_text_without_placeholders_alone() -> None:
    assert render("{{ not one }} {x}", values={}, defaults={}) == "{{ not one }} {x}"


@pytest.mark.parametrize(
    ("name", "valid"),
    [("a", True), ("_a1", True), ("A_b", True), ("1a", False), ("a-b", False), ("a" * 65, False)],
)
def test_is_variable_name(name: str, valid: bool) -> None:
    assert is_variable_name(name) is valid
