"""The serving example under a real uvicorn server (issue 15, "The service").

The server (``examples.serving.app``, backend ``agrad``: awaited on the loop)
runs on uvloop with httptools in a thread of this process, on a loopback
socket bound before it starts (no port race); the client is httpx on asyncio.
Every answer is checked against the float64 numpy reference, the shared
weights are checked unchanged after ``/tta``, and a ``/health`` request must
be answered while a large ``/saliency`` computes.  Assertions are about
answers and order, never about time; the timeouts are bounds for a hang.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import pytest

pytest.importorskip("starlette")
uvicorn = pytest.importorskip("uvicorn")
pytest.importorskip("httptools")
httpx = pytest.importorskip("httpx")
pytest.importorskip("greenlet")  # agrad.cooperative, the agrad backend

from examples.serving import model  # noqa: E402
from examples.serving.app import create_app  # noqa: E402

pytestmark = pytest.mark.anyio

TIMEOUT_S = 120.0  # bounds a hang; never reached by a slow but working run
LARGE_BATCH = 4096  # a forward and backward of about a second on a quiet 2-core machine


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the client's loop; the server runs uvloop in its own thread


class _Recorder:
    """ASGI wrapper that logs, in the server's own order, when a large ``/saliency`` (at least
    ``min_bytes`` of body) has its whole body (its handler computes next) and when each answer starts
    being sent.  The client cannot tell this order: a large answer takes a while to read."""

    def __init__(self, app: Any, min_bytes: int) -> None:
        self.app, self.min_bytes = app, min_bytes
        self.events: list[str] = []
        self.large_received = threading.Event()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        name = scope["path"]
        received = 0

        async def receive_and_log() -> dict:
            nonlocal received, name
            message = await receive()
            received += len(message.get("body", b""))
            if not message.get("more_body", False) and received >= self.min_bytes:
                name = "large " + name
                self.events.append(f"{name} received")
                self.large_received.set()
            return message

        async def send_and_log(message: dict) -> None:
            if message["type"] == "http.response.start":
                self.events.append(f"{name} answered")
            await send(message)

        return await self.app(scope, receive_and_log, send_and_log)


@dataclass
class Running:
    url: str
    recorder: _Recorder


@pytest.fixture(scope="module")
def server() -> Iterator[Running]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    app = _Recorder(create_app("agrad"), min_bytes=LARGE_BATCH * model.IN_FEATURES * 4)
    config = uvicorn.Config(app, loop="uvloop", http="httptools", ws="none", lifespan="off",
                            log_level="warning", access_log=False)
    uv_server = uvicorn.Server(config)
    thread = threading.Thread(target=uv_server.run, kwargs={"sockets": [sock]}, name="uvicorn", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while not uv_server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert uv_server.started, "uvicorn did not start"
        yield Running(f"http://127.0.0.1:{sock.getsockname()[1]}", app)
    finally:
        uv_server.should_exit = True
        thread.join(TIMEOUT_S)
        sock.close()


def _inputs(batch: int, seed: int) -> np.ndarray:
    return model.checkable_inputs(batch, np.random.default_rng(seed))


async def _post(client: Any, route: str, x: np.ndarray, n_out: int) -> np.ndarray:
    response = await client.post(route, content=x.tobytes())
    assert response.status_code == 200, response.text
    return np.frombuffer(response.content, "<f4").reshape(len(x), n_out)


def _assert_close(answer: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(answer, expected, rtol=1e-4, atol=1e-5)


async def test_concurrent_requests_get_correct_answers_and_leave_the_weights_unchanged(server: Running) -> None:
    before = [(w.copy(), b.copy()) for w, b in model.weights()]
    saliency_xs = [_inputs(batch, seed) for batch in (1, 4) for seed in range(16)]
    tta_xs = [_inputs(batch, 100 + seed) for seed, batch in enumerate((1, 3, 8, 8))]
    answers: dict[tuple[str, int], np.ndarray] = {}

    async def ask(route: str, i: int, x: np.ndarray, n_out: int) -> None:
        answers[route, i] = await _post(client, route, x, n_out)

    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        for _ in range(2):  # the second pass sees whatever the first pass's /tta did to the server
            answers.clear()
            async with anyio.create_task_group() as tg:
                for i, x in enumerate(saliency_xs):
                    tg.start_soon(ask, "/saliency", i, x, model.IN_FEATURES)
                for i, x in enumerate(tta_xs):
                    tg.start_soon(ask, "/tta", i, x, model.N_CLASSES)
            for i, x in enumerate(saliency_xs):
                _assert_close(answers["/saliency", i], model.saliency_reference(x))
            for i, x in enumerate(tta_xs):
                _assert_close(answers["/tta", i], model.tta_reference(x))
    for (w, b), (w0, b0) in zip(model.weights(), before):
        np.testing.assert_array_equal(w, w0)
        np.testing.assert_array_equal(b, b0)


async def test_health_is_answered_while_a_large_saliency_computes(server: Running) -> None:
    x = _inputs(LARGE_BATCH, 7)
    answer: list[np.ndarray] = []

    async def large() -> None:
        answer.append(await _post(client, "/saliency", x, model.IN_FEATURES))

    server.recorder.events.clear()
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(large)
            assert await anyio.to_thread.run_sync(server.recorder.large_received.wait, TIMEOUT_S)
            health = await client.get("/health")
    assert health.status_code == 200 and health.text == "ok"
    assert server.recorder.events == ["large /saliency received", "/health answered", "large /saliency answered"]
    _assert_close(answer[0], model.saliency_reference(x))


@pytest.mark.parametrize("n_bytes", [0, 3, model.IN_FEATURES * 4 + 1])
async def test_a_body_that_is_not_whole_rows_is_answered_400(server: Running, n_bytes: int) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT_S) as client:
        response = await client.post("/saliency", content=b"\0" * n_bytes)
    assert response.status_code == 400
