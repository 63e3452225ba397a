"""Refuse weak Ed25519 public keys: non-canonical encodings and small-order points.

A point of small order (order dividing the cofactor 8) lets many signatures verify for many
messages under some verifiers (RFC 8032 section 5.1.7 leaves cofactored checks optional), so
API.md section 7 refuses such keys at import. The check is done once per key, on import, with
plain integer arithmetic on the twisted Edwards curve (RFC 8032 section 5.1.3 decoding).
"""

from __future__ import annotations

_P = 2**255 - 19
_D = (-121665 * pow(121666, _P - 2, _P)) % _P
_SQRT_MINUS_ONE = pow(2, (_P - 1) // 4, _P)


def _decode(encoded: bytes) -> tuple[int, int] | None:
    """Decode a 32-byte point per RFC 8032 section 5.1.3; None when it is not canonical."""
    if len(encoded) != 32:
        return None
    y = int.from_bytes(encoded, "little")
    sign = y >> 255
    y &= (1 << 255) - 1
    if y >= _P:
        return None
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x2 = u * pow(v, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_MINUS_ONE % _P
    if (x * x - x2) % _P:
        return None
    if x == 0 and sign:
        return None
    if x & 1 != sign:
        x = _P - x
    return x, y


def _double(point: tuple[int, int]) -> tuple[int, int]:
    x, y = point
    xy = x * y % _P
    dxxyy = _D * xy * xy % _P
    return (
        2 * xy * pow(1 + dxxyy, _P - 2, _P) % _P,
        (y * y + x * x) * pow(1 - dxxyy, _P - 2, _P) % _P,
    )


def is_weak_public_key(encoded: bytes) -> bool:
    """Tell whether `encoded` is not a canonical curve point, or a point of small order."""
    point = _decode(encoded)
    if point is None:
        return True
    for _ in range(3):  # [8]P is the identity exactly when P's order divides 8
        point = _double(point)
    return point == (0, 1)
