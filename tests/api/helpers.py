"""Assertions shared by the HTTP tests."""

from __future__ import annotations

from typing import Any

import httpx


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Check the status and the API.md envelope, and return the body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = response.json()
    assert set(body) <= {"error", "param_errors"}, body
    assert set(body["error"]) == {"message", "code"}, body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str)
    assert body["error"]["message"]
    return body
