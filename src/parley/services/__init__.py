"""Use-cases: the only home of business rules."""

from parley.services.authn import Principal, authenticate
from parley.services.context import Context

__all__ = ["Context", "Principal", "authenticate"]
