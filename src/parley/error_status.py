"""The HTTP status of each error kind: one table for the REST API and the dashboard.

Lookup walks the error's MRO, as Starlette finds exception handlers, so a subclass takes
its nearest listed ancestor's status; a kind outside the table is a 500.
"""

from __future__ import annotations

from parley import errors

STATUS_BY_KIND: dict[type[errors.ParleyError], int] = {
    errors.InvalidRequest: 400,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.NotFound: 404,
    errors.Conflict: 409,
    errors.PayloadTooLarge: 413,
    errors.RateLimited: 429,
    errors.UpstreamError: 502,
    errors.NotOffered: 501,
    errors.Unavailable: 503,
    errors.ParleyError: 500,
}


def status_for(error: errors.ParleyError) -> int:
    """Return the HTTP status of an error kind, found along its MRO."""
    for cls in type(error).__mro__:
        if cls in STATUS_BY_KIND:
            return STATUS_BY_KIND[cls]
    return 500
