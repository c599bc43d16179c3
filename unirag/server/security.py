"""What guards the port: the bind check, the API key, the body size limit.

Safe by default: the server listens on 127.0.0.1, reachable from this machine only. Listening on
any other address needs an API key (clients send it as `Authorization: Bearer KEY`, as OpenAI's do),
and without one the server refuses to start. With a key, every endpoint but /health needs it;
keys are compared in constant time. Bodies above the limit are refused (413) before they are
parsed, also when no Content-Length announces them.
"""

from __future__ import annotations

import hmac
import ipaddress
import json

from unirag.errors import UniragError
from unirag.server.errors import error_body

OPEN_PATHS = {"/health"}  # what a load balancer's probe reads without a key


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, api_key: str | None) -> None:
    """Refuse to listen beyond this machine without an API key."""
    if not is_loopback(host) and not api_key:
        raise UniragError(f"--host {host} makes the API reachable from other machines; set an API key "
                          "(--api-key or UNIRAG_API_KEY) that clients send as a bearer token")


def key_matches(header: str | None, api_key: str) -> bool:
    scheme, _, given = (header or "").partition(" ")
    # compare_digest takes the same time whatever prefix matches; bytes, so any header is comparable
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), api_key.encode())


async def _send_error(send, status: int, message: str, code: str, headers: list | None = None) -> None:
    body = json.dumps(error_body(status, message, code=code)).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware: the API key (when one is set), then the body size limit. The body is read
    here, whole, and handed on, so an oversized one never reaches the JSON parser."""

    def __init__(self, app, api_key: str | None, max_body_bytes: int):
        self.app, self.api_key, self.max_body_bytes = app, api_key, max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self.api_key and scope["path"] not in OPEN_PATHS:
            headers = dict(scope.get("headers") or [])
            auth = headers.get(b"authorization", b"").decode("latin-1")
            if not key_matches(auth, self.api_key):
                return await _send_error(send, 401, "missing or wrong API key; send it as "
                                         "`Authorization: Bearer KEY`", "invalid_api_key",
                                         [(b"www-authenticate", b"Bearer")])
        declared = dict(scope.get("headers") or []).get(b"content-length")
        too_big = f"the request body is larger than the server's limit of {self.max_body_bytes} bytes"
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            return await _send_error(send, 413, too_big, "body_too_large")
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_body_bytes:
                return await _send_error(send, 413, too_big, "body_too_large")
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect a streaming response listens for

        return await self.app(scope, replay, send)
