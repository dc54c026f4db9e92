"""The broker's HTTP port (``--http HOST:PORT``): ``/metrics`` for Prometheus, and the console's pages.

It runs on the broker's event loop, like everything that reads the broker's state, so a scrape sees that state
between two requests, never in the middle of one. Only GET (and HEAD) of known paths is answered; a request
that is malformed, too large or too slow gets its error status and the connection closes, without effect on
the Kafka listeners.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from http import HTTPStatus
from urllib.parse import unquote

log = logging.getLogger("groupstream.broker.http")

_MAX_HEAD = 16 * 1024  # request line and headers
_READ_TIMEOUT_S = 10.0

Page = tuple[str, bytes]  # content type and body
Route = Callable[[str], Page | None]
"""Called with the rest of the path after the route's own (a route ending in ``/`` takes a name after it);
None: no such page."""


class HttpServer:
    def __init__(self, routes: dict[str, Route]) -> None:
        self._routes = routes
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> tuple[str, int]:
        """Listen; the address bound (port 0 picks a free one)."""
        self._server = await asyncio.start_server(self._serve, host, port, limit=_MAX_HEAD)
        bound = self._server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
                return
            status, content_type, body, method = self._answer(head)
            lines = [
                f"HTTP/1.1 {status.value} {status.phrase}",
                f"Content-Type: {content_type}",
                f"Content-Length: {len(body)}",
                "Connection: close",
            ]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            if method != "HEAD":
                writer.write(body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def _answer(self, head: bytes) -> tuple[HTTPStatus, str, bytes, str]:
        parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            return HTTPStatus.BAD_REQUEST, "text/plain", b"malformed request line\n", "GET"
        method, target = parts[0], parts[1]
        if method not in ("GET", "HEAD"):
            return HTTPStatus.METHOD_NOT_ALLOWED, "text/plain", b"only GET\n", method
        path = unquote(target.split("?", 1)[0])
        found = self._route(path)
        try:
            page = found[0](found[1]) if found is not None else None
        except Exception:
            log.exception("the page %s failed", target)
            return HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain", b"internal error\n", method
        if page is None:
            known = ", ".join(sorted(self._routes))
            return HTTPStatus.NOT_FOUND, "text/plain", f"no page {path}; pages: {known}\n".encode(), method
        return HTTPStatus.OK, page[0], page[1], method

    def _route(self, path: str) -> tuple[Route, str] | None:
        if path in self._routes:
            return self._routes[path], ""
        prefixes = [p for p in self._routes if p.endswith("/") and p != "/" and path.startswith(p)]
        if not prefixes:
            return None
        prefix = max(prefixes, key=len)
        return self._routes[prefix], path[len(prefix) :]
