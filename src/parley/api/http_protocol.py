"""uvicorn's HTTP/1.1 protocols, answering malformed requests with the error envelope.

uvicorn answers a request its parser refuses (`Content-Length: -1`, a broken request line,
oversized headers) with a text/plain "Invalid HTTP request received." before the
application sees anything. These subclasses answer the same 400, closing the connection as
uvicorn does, with API.md's body instead: `{"error": {"message", "code": "invalid_request"}}`.

`parley serve` selects one by import string (`http=HTTPTOOLS_PROTOCOL`), so every worker
process loads it.
"""

from __future__ import annotations

import json
from typing import Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from parley.api.errors import error_body
from parley.errors import InvalidRequest

HTTPTOOLS_PROTOCOL: Final = "parley.api.http_protocol:EnvelopeHttpToolsProtocol"
H11_PROTOCOL: Final = "parley.api.http_protocol:EnvelopeH11Protocol"

MALFORMED_BODY: Final = json.dumps(
    error_body(InvalidRequest("The HTTP request is malformed.")), separators=(",", ":")
).encode()
_HEADERS: Final = (
    (b"content-type", b"application/json"),
    (b"content-length", str(len(MALFORMED_BODY)).encode()),
    (b"connection", b"close"),
)


class EnvelopeHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol; a request it cannot parse gets the JSON envelope."""

    def send_400_response(self, msg: str) -> None:  # noqa: ARG002 (uvicorn's text is replaced)
        head = [b"HTTP/1.1 400 Bad Request\r\n"]
        for name, value in (*self.server_state.default_headers, *_HEADERS):
            head += [name, b": ", value, b"\r\n"]
        self.transport.write(b"".join([*head, b"\r\n", MALFORMED_BODY]))
        self.transport.close()


class EnvelopeH11Protocol(H11Protocol):
    """uvicorn's h11 protocol; a request it cannot parse gets the JSON envelope."""

    def send_400_response(self, msg: str) -> None:  # noqa: ARG002 (uvicorn's text is replaced)
        headers = [*self.server_state.default_headers, *_HEADERS]
        response = h11.Response(status_code=400, headers=headers, reason=b"Bad Request")
        output = self.conn.send(response)
        self.transport.write(output or b"")
        output = self.conn.send(h11.Data(data=MALFORMED_BODY))
        self.transport.write(output or b"")
        output = self.conn.send(h11.EndOfMessage())
        self.transport.write(output or b"")
        self.transport.close()
