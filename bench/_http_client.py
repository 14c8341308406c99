"""A lean HTTP/1.1 client on asyncio streams, for load generators.

httpx costs 2.5-6 ms of CPU per request on a small machine, so a load
generator built on it measures itself.  This client does only what a
benchmark against a known server needs: one request at a time per
connection, keep-alive, ``Content-Length`` framing both ways (no chunked
bodies), status code and body back.  Anything else the server sends is an
error, never silently worked around.
"""

from __future__ import annotations

import asyncio

__all__ = ["REQUEST_ERRORS", "Connection", "HTTPError"]


class HTTPError(Exception):
    """The server's answer could not be framed (no Content-Length, bad status line) or the connection closed."""


REQUEST_ERRORS = (OSError, EOFError, TimeoutError, ValueError, HTTPError, asyncio.LimitOverrunError)
"""What one request (with its connection and a timeout around it) can fail with; a benchmark counts these."""


class Connection:
    """One keep-alive HTTP/1.1 connection; ``request`` calls must not overlap."""

    def __init__(self, host: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._host = host.encode()
        self._reader = reader
        self._writer = writer
        self.reusable = True
        """False once the server or the caller asked to close, or a request failed."""

    @classmethod
    async def open(cls, host: str, port: int) -> Connection:
        reader, writer = await asyncio.open_connection(host, port)
        return cls(host, reader, writer)

    async def request(self, method: str, path: str, body: bytes = b"", close: bool = False) -> tuple[int, bytes]:
        """Send one request and read its whole answer: ``(status, body)``.

        ``close`` sends ``Connection: close`` (the connection is not reusable after).
        On any failure the connection is marked not reusable and the exception propagates.
        """
        self.reusable = False  # until the answer has been read whole
        head = (f"{method} {path} HTTP/1.1\r\nHost: ".encode() + self._host
                + f"\r\nContent-Length: {len(body)}\r\n".encode()
                + (b"Content-Type: application/octet-stream\r\n" if body else b"")
                + (b"Connection: close\r\n" if close else b"") + b"\r\n")
        self._writer.write(head)
        if body:
            self._writer.write(body)
        await self._writer.drain()
        try:
            response_head = await self._reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            raise HTTPError("connection closed before the answer") from exc
        status, length, keep_alive = _parse_head(response_head)
        data = await self._reader.readexactly(length)
        self.reusable = keep_alive and not close
        return status, data

    async def aclose(self) -> None:
        self.reusable = False
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass  # the peer already reset it: closed either way


def _parse_head(head: bytes) -> tuple[int, int, bool]:
    """``(status, content length, keep-alive)`` from a response's status line and headers."""
    lines = head.split(b"\r\n")
    if not lines[0].startswith(b"HTTP/1.1 ") or len(lines[0]) < 12:
        raise HTTPError(f"bad status line {lines[0]!r}")
    status = int(lines[0][9:12])
    length, keep_alive = None, True
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"connection" and value.strip().lower() == b"close":
            keep_alive = False
        elif name == b"transfer-encoding":
            raise HTTPError("chunked answers are not supported")
    if length is None:
        raise HTTPError("answer without Content-Length")
    return status, length, keep_alive
