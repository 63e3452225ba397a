"""Use-cases: the only home of business rules.

`authenticate` loads on first use (PEP 562 `__getattr__`): importing one service, as the
operator commands do, does not import authentication and with it the JWT kernel and every
credential's service. Its `Principal` is a record (parley/records.py).
"""

from importlib import import_module
from typing import TYPE_CHECKING

from parley.services.context import Context, DatabaseContext

if TYPE_CHECKING:
    from parley.services.authn import authenticate

__all__ = ["Context", "DatabaseContext", "authenticate"]
_AUTHN_NAMES = frozenset({"authenticate"})


def __getattr__(name: str) -> object:
    """Load authentication when one of its names is first asked for."""
    if name not in _AUTHN_NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module("parley.services.authn"), name)
    globals()[name] = value
    return value
