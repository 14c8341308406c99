"""The open-loop health probe of ``bench_serving.py``, run in a process of its own.

``GET /health`` every 10 ms, open loop: a probe is sent when it is due
whether or not earlier ones have been answered, and its latency is taken from
its *scheduled* send time, so a server whose loop stalls is charged the whole
stall.  The probe has its own process so that the load clients' work
(sending, checking answers) never delays it; what delay remains on its own
loop is recorded as each probe's send lag.

Two connection modes:

* ``pre-opened`` — a pool of keep-alive connections opened before the run;
  a probe takes a free one and opens another only if all are busy;
* ``per-probe`` — a fresh TCP connection per probe (``Connection: close``),
  as a kubelet health check does: it measures accepting too.

Protocol with the parent (``python bench/_health_probe.py PORT MODE``): the
child prints ``ready`` once its pool is open and starts probing; a line on
its stdin stops it; it waits (bounded) for probes in flight, then prints one
JSON line: latencies and send lags (ms), counts, error kinds, its CPU seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import time

import uvloop
from _http_client import REQUEST_ERRORS, Connection

__all__ = ["PROBE_MODES", "HealthProbe"]

PROBE_MODES = ("pre-opened", "per-probe")
PROBE_PERIOD_S = 0.010
PRE_OPENED = 4
PROBE_TIMEOUT_S = 120.0  # a bound for a hung server, never a target
HOST = "127.0.0.1"
clock = time.perf_counter


class HealthProbe:
    """Probes one server every 10 ms until stopped; see the module docstring."""

    def __init__(self, port: int, mode: str) -> None:
        if mode not in PROBE_MODES:
            raise ValueError(f"mode must be one of {PROBE_MODES}, not {mode!r}")
        self.port, self.mode = port, mode
        self.latencies_ms: list[float] = []
        self.send_lags_ms: list[float] = []
        self.errors: dict[str, int] = {}
        self._idle: list[Connection] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def open_pool(self) -> None:
        if self.mode == "pre-opened":
            self._idle = [await Connection.open(HOST, self.port) for _ in range(PRE_OPENED)]

    async def run(self, stop: asyncio.Event) -> None:
        """Start a probe every period until ``stop`` is set, then wait (bounded) for those in flight."""
        start = clock()
        k = 0
        while True:
            due = start + k * PROBE_PERIOD_S
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, due - clock()))
            if stop.is_set():
                break
            task = asyncio.create_task(self._probe(due))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            k += 1
        if self._tasks:
            _, late = await asyncio.wait(set(self._tasks), timeout=PROBE_TIMEOUT_S)
            for task in late:
                task.cancel()
                self._error("probe timed out")
        for conn in self._idle:
            await conn.aclose()

    def _error(self, kind: str) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1

    async def _probe(self, due: float) -> None:
        self.send_lags_ms.append(1e3 * (clock() - due))
        conn = None
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                conn = self._idle.pop() if self._idle else await Connection.open(HOST, self.port)
                status, body = await conn.request("GET", "/health", close=self.mode == "per-probe")
            if status == 200 and body == b"ok":
                self.latencies_ms.append(1e3 * (clock() - due))
            else:
                self._error(f"health status {status}")
        except REQUEST_ERRORS as exc:
            self._error(f"health {type(exc).__name__}")
        finally:
            if conn is not None:
                if conn.reusable:
                    self._idle.append(conn)
                else:
                    await conn.aclose()


async def _main(port: int, mode: str) -> dict[str, object]:
    probe = HealthProbe(port, mode)
    await probe.open_pool()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    # A blocking read of stdin in a thread: a line (or EOF, if the parent died) stops the probe.
    threading.Thread(target=lambda: (sys.stdin.readline(), loop.call_soon_threadsafe(stop.set)), daemon=True).start()
    print("ready", flush=True)
    cpu0 = time.process_time()
    await probe.run(stop)
    return {"latencies_ms": probe.latencies_ms, "send_lags_ms": probe.send_lags_ms, "ok": len(probe.latencies_ms),
            "errors": probe.errors, "cpu_s": time.process_time() - cpu0}


if __name__ == "__main__":
    port_arg, mode_arg = sys.argv[1:]
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        print(json.dumps(runner.run(_main(int(port_arg), mode_arg))), flush=True)
