"""Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}, for every failure.

OpenAI's clients read that object to raise their own typed errors (BadRequestError,
AuthenticationError, NotFoundError...), so a tool built on them reports our message as it would
OpenAI's. A request FastAPI cannot parse (bad JSON, a wrong field) is a 400 here, as at OpenAI,
not FastAPI's 422.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from unirag.errors import UniragError
from unirag.server.worker import QueueFull

log = logging.getLogger("unirag")

TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
         404: "not_found_error", 405: "invalid_request_error", 413: "invalid_request_error",
         503: "server_overloaded", 500: "server_error"}


class ApiError(Exception):
    """A request the server refuses: its HTTP status and OpenAI-shaped body."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code
        self.headers = headers


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": TYPES.get(status, "invalid_request_error"),
                      "param": param, "code": code}}


def error_response(status: int, message: str, param: str | None = None, code: str | None = None,
                   headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message, param, code), status_code=status, headers=headers)


def api_error(err: Exception) -> ApiError:
    """Any exception a job raised, as the ApiError to answer with."""
    if isinstance(err, ApiError):
        return err
    if isinstance(err, QueueFull):
        return ApiError(503, str(err), code="queue_full", headers={"Retry-After": "1"})
    if isinstance(err, UniragError):  # the user's input: a prompt too long, an empty question...
        return ApiError(400, str(err))
    if type(err).__module__.split(".")[0] == "chromadb":
        log.error("the Chroma database failed: %s: %s", type(err).__name__, err)
        return ApiError(500, f"the Chroma database failed ({type(err).__name__})", code="chroma_error")
    log.exception("a request failed", exc_info=err)
    return ApiError(500, f"internal error ({type(err).__name__}); the server log has the details")


def _param(loc) -> str | None:
    """The failing field as OpenAI names it ("messages.0.content"), without FastAPI's "body"."""
    parts = [str(p) for p in loc if p != "body"]
    return ".".join(parts) or None


def install(app: FastAPI) -> None:
    """Answer every error in OpenAI's shape."""

    @app.exception_handler(ApiError)
    async def _api(request: Request, exc: ApiError):
        return error_response(exc.status, exc.message, exc.param, exc.code, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        first = exc.errors()[0] if exc.errors() else {}
        param = _param(first.get("loc", ()))
        message = first.get("msg", "invalid request")
        if first.get("type") == "json_invalid":
            message, param = "the request body is not valid JSON", None
        elif param:
            message = f"{param}: {message}"
        return error_response(400, message, param)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "request failed"
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}"
        return error_response(exc.status_code, message, headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _other(request: Request, exc: Exception):
        err = api_error(exc)
        return error_response(err.status, err.message, err.param, err.code, err.headers)
