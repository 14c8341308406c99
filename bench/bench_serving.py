"""Server benchmark (issue 15): the serving example under load, four backends, health probed open-loop.

One uvicorn server per backend (``python -m examples.serving.app``, uvloop,
httptools, one worker, 127.0.0.1, a free port), all started up front and
warmed up.  The load clients run in this process and the health probe in a
child process of its own (``_health_probe.py``), both on uvloop with the lean
client in ``_http_client.py`` (httpx would cost milliseconds of CPU per
request and measure itself); neither is ever the server.  Scenarios:

* batch 1 and 32 x C = 1, 8, 32 closed-loop clients, each sending
  ``POST /saliency`` back to back over its own keep-alive connection for
  ``--duration`` seconds;
* one huge request: a single batch-8192 ``/saliency`` alone.

Throughout each scenario the health probe sends ``GET /health`` every 10 ms,
open loop, its latency taken from the probe's *scheduled* send time (a
stalled loop counts fully), in two modes, each scenario run in both:
``pre-opened`` (a pool of keep-alive connections opened before the run; a
probe opens another only if all are busy) and ``per-probe`` (a fresh TCP
connection per probe, as a kubelet check does).

Every answer is checked against the numpy float64 reference
(``np.allclose``, rtol 1e-4, atol 1e-5) for a fixed set of inputs; wrong
answers and errors (non-200, connection failures, timeouts) are counted,
never retried.  Each server's RSS is sampled every 0.5 s over the whole run.
The load generator's own cost is printed beside the figures: the probe's
send lag (how late its loop sent each probe) and CPU ms per request.
Backends are interleaved: round r runs them in order A B C D (reversed on
odd rounds), each through every scenario; figures are medians over rounds.

    python bench/bench_serving.py                 # 8 s scenarios, 2 rounds (about 20 minutes)
    python bench/bench_serving.py --quick         # a smoke run: two 1 s scenarios, 1 round (under a minute)
    python bench/bench_serving.py --backends agrad torch-thread --json out.json

Each scenario's line (on stderr) starts as the scenario does and ends with its figures.

No BLAS or OpenMP environment variable is set: the defaults are what is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import uvloop
from _harness import machine_info, progress, require
from _health_probe import PROBE_MODES
from _http_client import REQUEST_ERRORS, Connection

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from examples.serving import model  # noqa: E402

clock = time.perf_counter
HOST = "127.0.0.1"
BACKENDS = ("agrad", "agrad-thread", "torch", "torch-thread")
PROBE_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_health_probe.py")
RSS_PERIOD_S = 0.5
INPUTS_PER_BATCH = 16
HUGE_BATCH = 8192
REQUEST_TIMEOUT_S = 120.0  # a bound, not a target: hit only by a hung server
STARTUP_TIMEOUT_S = 120.0
RTOL, ATOL = 1e-4, 1e-5
TARGET_HEALTH_RATIO = 0.5  # agrad's health p99 at most half of torch-thread's
TARGET_THROUGHPUT_RATIO = 1.0  # agrad's req/s at least torch-thread's


@dataclass(frozen=True)
class Scenario:
    batch: int
    clients: int  # 0: the one huge request

    @property
    def name(self) -> str:
        return f"batch {self.batch}, C={self.clients}" if self.clients else f"one batch-{self.batch} request"


SCENARIOS = (*(Scenario(b, c) for b in (1, 32) for c in (1, 8, 32)), Scenario(HUGE_BATCH, 0))
# --quick: a smoke run through every backend and probe mode, each kind of scenario once, 1 s each
QUICK_SCENARIOS, QUICK_DURATION = (Scenario(32, 8), Scenario(2048, 0)), 1.0


# -- inputs and their expected answers ---------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """Request bodies of one batch size and the reference answers they must get."""

    bodies: tuple[bytes, ...]
    expected: tuple[np.ndarray, ...]

    def correct(self, i: int, answer: bytes) -> bool:
        want = self.expected[i]
        if len(answer) != want.nbytes:
            return False
        return bool(np.allclose(np.frombuffer(answer, "<f4").reshape(want.shape), want, rtol=RTOL, atol=ATOL))


def make_inputs(batch: int, count: int, seed: int) -> Inputs:
    rng = np.random.default_rng(seed)
    xs = [model.checkable_inputs(batch, rng) for _ in range(count)]
    return Inputs(tuple(x.astype("<f4").tobytes() for x in xs), tuple(model.saliency_reference(x) for x in xs))


# -- servers -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@dataclass
class Server:
    """One backend's server process, its log, and its RSS samples (MiB)."""

    backend: str
    port: int
    process: subprocess.Popen[bytes]
    log: Any
    rss_mib: list[float] = field(default_factory=list)
    output: str = ""

    def sample_rss(self) -> None:
        try:
            with open(f"/proc/{self.process.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        self.rss_mib.append(int(line.split()[1]) / 1024)
        except OSError:
            pass  # exited: its absence shows in the errors

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.seek(0)
        self.output = self.log.read().decode(errors="replace").strip()
        self.log.close()


def start_server(backend: str) -> Server:
    port = free_port()
    log = tempfile.TemporaryFile()
    process = subprocess.Popen([sys.executable, "-m", "examples.serving.app", "--backend", backend,
                                "--port", str(port)], cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    return Server(backend, port, process, log)


async def wait_ready(server: Server) -> None:
    deadline = clock() + STARTUP_TIMEOUT_S
    while clock() < deadline:
        if server.process.poll() is not None:
            break
        with contextlib.suppress(*REQUEST_ERRORS):
            async with asyncio.timeout(max(deadline - clock(), 0.1)):
                conn = await Connection.open(HOST, server.port)
                try:
                    if (await conn.request("GET", "/health"))[0] == 200:
                        return
                finally:
                    await conn.aclose()
        await asyncio.sleep(0.2)
    server.log.seek(0)
    raise RuntimeError(f"{server.backend} server did not start:\n{server.log.read().decode(errors='replace')}")


async def warm_up(server: Server, inputs: dict[int, Inputs]) -> None:
    """A few requests of each batch size (one of the huge one, which has one input: its arrays set the
    allocator's high-water mark, so that RSS measured from here on shows growth, not first use), each
    checked: an error here stops the benchmark."""
    conn = await Connection.open(HOST, server.port)
    try:
        for batch_inputs in inputs.values():
            for i in range(min(4, len(batch_inputs.bodies))):
                status, answer = await asyncio.wait_for(
                    conn.request("POST", "/saliency", batch_inputs.bodies[i]), REQUEST_TIMEOUT_S)
                if status != 200 or not batch_inputs.correct(i, answer):
                    raise RuntimeError(f"{server.backend}: warm-up answer wrong (status {status})")
    finally:
        await conn.aclose()


async def sample_rss(servers: Sequence[Server]) -> None:
    while True:
        for server in servers:
            server.sample_rss()
        await asyncio.sleep(RSS_PERIOD_S)


# -- one scenario ------------------------------------------------------------------------------


@dataclass
class Tally:
    ok: int = 0
    wrong: int = 0
    errors: int = 0
    error_kinds: dict[str, int] = field(default_factory=dict)

    def error(self, what: str) -> None:
        self.errors += 1
        self.error_kinds[what] = self.error_kinds.get(what, 0) + 1


class ProbeProcess:
    """The health probe (``_health_probe.py``) in a child process, so the load clients never delay it."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process

    @classmethod
    async def start(cls, port: int, mode: str) -> ProbeProcess:
        process = await asyncio.create_subprocess_exec(sys.executable, PROBE_SCRIPT, str(port), mode,
                                                       stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        probe = cls(process)
        try:
            line = await asyncio.wait_for(process.stdout.readline(), STARTUP_TIMEOUT_S)  # type: ignore[union-attr]
        except BaseException:
            await probe.kill()
            raise
        if line != b"ready\n":
            await probe.kill()
            raise RuntimeError(f"health probe did not start: {line!r}")
        return probe

    async def stop(self) -> dict[str, Any]:
        """Stop probing; the probe's results once its probes in flight are done."""
        try:
            self._process.stdin.write(b"stop\n")  # type: ignore[union-attr]
            out = await asyncio.wait_for(self._process.stdout.read(), REQUEST_TIMEOUT_S + 30)  # type: ignore[union-attr]
            await self._process.wait()
        finally:
            await self.kill()
        return json.loads(out.splitlines()[-1])

    async def kill(self) -> None:
        if self._process.returncode is None:
            self._process.kill()
            await self._process.wait()


async def closed_loop_client(port: int, inputs: Inputs, first: int, deadline: float, tally: Tally,
                             max_requests: int | None = None) -> None:
    """Send ``/saliency`` back to back until ``deadline`` (or ``max_requests``), cycling through the inputs
    from ``first``; every answer is checked and counted in ``tally``."""
    conn: Connection | None = None
    i = first
    try:
        while clock() < deadline and (max_requests is None or i - first < max_requests):
            k = i % len(inputs.bodies)
            i += 1
            try:
                async with asyncio.timeout(REQUEST_TIMEOUT_S):
                    if conn is None:
                        conn = await Connection.open(HOST, port)
                    status, answer = await conn.request("POST", "/saliency", inputs.bodies[k])
            except REQUEST_ERRORS as exc:
                tally.error(f"saliency {type(exc).__name__}")
                if conn is not None:
                    await conn.aclose()
                    conn = None
                continue
            if status != 200:
                tally.error(f"saliency status {status}")
            elif inputs.correct(k, answer):
                tally.ok += 1
            else:
                tally.wrong += 1
            if not conn.reusable:
                await conn.aclose()
                conn = None
    finally:
        if conn is not None:
            await conn.aclose()


def _percentiles(ms: list[float]) -> dict[str, float]:
    if not ms:
        return {"p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    return {"p50": float(np.percentile(ms, 50)), "p99": float(np.percentile(ms, 99)), "max": max(ms)}


async def run_scenario(server: Server, scenario: Scenario, mode: str, inputs: Inputs, duration: float,
                       round_: int) -> dict[str, Any]:
    probe = await ProbeProcess.start(server.port, mode)
    tally = Tally()
    try:
        cpu0, t0 = time.process_time(), clock()
        if scenario.clients:
            deadline = t0 + duration
            await asyncio.gather(*(closed_loop_client(server.port, inputs, c, deadline, tally)
                                   for c in range(scenario.clients)))
        else:
            await closed_loop_client(server.port, inputs, 0, float("inf"), tally, max_requests=1)
        elapsed, cpu = clock() - t0, time.process_time() - cpu0
    finally:
        probed = await probe.stop()
    requests = tally.ok + tally.wrong + tally.errors + probed["ok"] + sum(probed["errors"].values())
    return {
        "backend": server.backend, "scenario": scenario.name, "batch": scenario.batch, "clients": scenario.clients,
        "probe_mode": mode, "round": round_, "elapsed_s": elapsed,
        "req_per_s": (tally.ok + tally.wrong) / elapsed,
        "health_ms": _percentiles(probed["latencies_ms"]), "probes": probed["ok"],
        "probe_send_lag_ms": _percentiles(probed["send_lags_ms"]),
        "ok": tally.ok, "wrong": tally.wrong, "errors": tally.errors + sum(probed["errors"].values()),
        "error_kinds": {**tally.error_kinds, **probed["errors"]},
        "client_cpu_ms_per_request": 1e3 * (cpu + probed["cpu_s"]) / max(requests, 1),
    }


# -- the run -----------------------------------------------------------------------------------


def backend_order(backends: Sequence[str], round_: int) -> list[str]:
    return list(backends) if round_ % 2 == 0 else list(reversed(backends))


async def run_all(servers: dict[str, Server], inputs: dict[int, Inputs], scenarios: Sequence[Scenario],
                  duration: float, rounds: int) -> list[dict[str, Any]]:
    progress(1, 2, f"{len(servers)} servers: waiting for them to start, warming them up")
    await asyncio.gather(*(wait_ready(s) for s in servers.values()))
    for server in servers.values():
        await warm_up(server, inputs)
    sampler = asyncio.create_task(sample_rss(list(servers.values())))
    results = []
    runs = [(round_, backend, scenario, mode) for round_ in range(rounds)
            for backend in backend_order(list(servers), round_) for scenario in scenarios for mode in PROBE_MODES]
    progress(2, 2, f"{len(runs)} scenario runs of {duration:g} s (the huge request: as long as it takes), "
             "one line each on stderr")
    width = 2 * len(str(len(runs))) + 3
    try:
        for k, (round_, backend, scenario, mode) in enumerate(runs, 1):
            # the line starts as the scenario does and ends with its figures
            counter = f"[{k}/{len(runs)}]"
            print(f"  {counter:>{width}} round {round_} {backend:>12} | {scenario.name:<24} | {mode:<10} |", end="",
                  file=sys.stderr, flush=True)
            result = await run_scenario(servers[backend], scenario, mode, inputs[scenario.batch], duration, round_)
            results.append(result)
            print(f" health p99 {result['health_ms']['p99']:8.1f} ms | {result['req_per_s']:7.2f} req/s | "
                  f"wrong {result['wrong']} errors {result['errors']}", file=sys.stderr, flush=True)
    finally:
        sampler.cancel()
    return results


def median_cells(results: Sequence[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, float]]:
    """(mode, scenario, backend) -> medians over rounds of health p50/p99/max and req/s, and summed counts."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["probe_mode"], r["scenario"], r["backend"]), []).append(r)
    return {key: {
        "p50": statistics.median(r["health_ms"]["p50"] for r in rs),
        "p99": statistics.median(r["health_ms"]["p99"] for r in rs),
        "max": statistics.median(r["health_ms"]["max"] for r in rs),
        "req_per_s": statistics.median(r["req_per_s"] for r in rs),
        "send_lag_p99": statistics.median(r["probe_send_lag_ms"]["p99"] for r in rs),
        "client_cpu_ms": statistics.median(r["client_cpu_ms_per_request"] for r in rs),
        "ok": sum(r["ok"] for r in rs), "wrong": sum(r["wrong"] for r in rs), "errors": sum(r["errors"] for r in rs),
    } for key, rs in groups.items()}


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    line = lambda row: "| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |"
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def report(results: Sequence[dict[str, Any]], servers: dict[str, Server], scenarios: Sequence[Scenario]
           ) -> Iterator[str]:
    cells = median_cells(results)
    backends = list(servers)
    for mode in PROBE_MODES:
        yield f"\nhealth probe connections {mode}: health p99 ms; saliency req/s (medians over rounds; " \
              f"for the one huge request, 1 / its latency)\n"
        yield _table(["scenario", *backends], [
            [s.name, *(f"{cells[mode, s.name, b]['p99']:.1f}; {cells[mode, s.name, b]['req_per_s']:.2f}"
                       for b in backends)] for s in scenarios])
        if "agrad" in backends and "torch-thread" in backends:
            yield f"\nratios agrad / torch-thread, probes {mode} (targets: health p99 <= {TARGET_HEALTH_RATIO}, " \
                  f"req/s >= {TARGET_THROUGHPUT_RATIO})\n"
            rows = []
            for s in scenarios:
                a, t = cells[mode, s.name, "agrad"], cells[mode, s.name, "torch-thread"]
                health, speed = a["p99"] / t["p99"], a["req_per_s"] / t["req_per_s"]
                rows.append([s.name, f"{health:.2f}", f"{speed:.2f}",
                             "met" if health <= TARGET_HEALTH_RATIO else "NOT met",
                             "met" if speed >= TARGET_THROUGHPUT_RATIO else "NOT met"])
            yield _table(["scenario", "health p99 ratio", "req/s ratio", "health target", "throughput target"], rows)
    yield "\ndetails (medians over rounds; counts summed): health p50/p99/max ms; saliency req/s; the load " \
          "generator's own probe send lag p99 ms and CPU ms per request; answers ok/wrong; errors\n"
    yield _table(["probes", "scenario", "backend", "p50", "p99", "max", "req/s", "lag p99", "cpu/req", "ok",
                  "wrong", "errors"], [
        [mode, s.name, b, *(f"{cells[mode, s.name, b][k]:.1f}" for k in ("p50", "p99", "max")),
         f"{cells[mode, s.name, b]['req_per_s']:.2f}", f"{cells[mode, s.name, b]['send_lag_p99']:.1f}",
         f"{cells[mode, s.name, b]['client_cpu_ms']:.3f}",
         *(str(cells[mode, s.name, b][k]) for k in ("ok", "wrong", "errors"))]
        for mode in PROBE_MODES for s in scenarios for b in backends])
    yield "\nserver RSS MiB over the whole run, after warm-up (start / end / max)\n"
    yield _table(["backend", "start", "end", "max", "samples"], [
        [b, *(f"{v:.0f}" for v in (s.rss_mib[0], s.rss_mib[-1], max(s.rss_mib))), str(len(s.rss_mib))]
        if s.rss_mib else [b, "-", "-", "-", "0"] for b, s in servers.items()])
    kinds: dict[str, int] = {}
    for r in results:
        for k, n in r["error_kinds"].items():
            kinds[k] = kinds.get(k, 0) + n
    wrong = sum(r["wrong"] for r in results)
    checked = sum(r["ok"] + r["wrong"] for r in results)
    yield f"\nanswers checked {checked}, wrong {wrong}; errors {sum(kinds.values())}" + \
          (f" ({', '.join(f'{k}: {n}' for k, n in sorted(kinds.items()))})" if kinds else "")
    cpu = [r["client_cpu_ms_per_request"] for r in results]
    yield f"load generator CPU per request (saliency and health): median {statistics.median(cpu):.3f} ms, " \
          f"max {max(cpu):.3f} ms over {len(cpu)} scenario runs"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--duration", type=float, default=8.0, help="seconds per closed-loop scenario")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--quick", action="store_true",
                        help=f"a smoke run: {', '.join(s.name for s in QUICK_SCENARIOS)}; {QUICK_DURATION:g} s "
                        "scenarios, one round")
    parser.add_argument("--json", help="write the raw results here")
    args = parser.parse_args(argv)
    scenarios = QUICK_SCENARIOS if args.quick else SCENARIOS
    if args.quick:
        args.duration, args.rounds = QUICK_DURATION, 1
    if not 0 < args.duration <= 600 or not 0 < args.rounds <= 20:
        parser.error("--duration must be in (0, 600] s and --rounds in [1, 20]")
    require(__file__, "starlette", "uvicorn", "httptools", "safetensors",
            *(["torch"] if any(b.startswith("torch") for b in args.backends) else []))

    load_before = os.getloadavg()
    print("\n".join(machine_info().splitlines()[:-1]))
    print(f"load gen   clients in this process, health probe in a child process; uvloop {uvloop.__version__}, "
          f"lean HTTP/1.1 client; servers uvicorn "
          f"(uvloop, httptools, 1 worker) on {HOST}")
    print(f"run        {args.rounds} round(s), {args.duration:g} s per closed-loop scenario, backends "
          f"{' '.join(args.backends)} (reversed on odd rounds)")
    inputs = {b: make_inputs(b, INPUTS_PER_BATCH, seed=b) for b in (1, 32)}
    inputs |= {s.batch: make_inputs(s.batch, 1, seed=s.batch) for s in scenarios if not s.clients}

    servers: dict[str, Server] = {}
    try:
        for backend in args.backends:
            servers[backend] = start_server(backend)
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            results = runner.run(run_all(servers, inputs, scenarios, args.duration, args.rounds))
    finally:
        for server in servers.values():
            server.stop()
    load_after = os.getloadavg()
    print(f"load average before {' '.join(f'{v:.2f}' for v in load_before)}, "
          f"after {' '.join(f'{v:.2f}' for v in load_after)} (1, 5, 15 min)")
    for block in report(results, servers, scenarios):
        print(block)
    for server in servers.values():
        if server.output:
            print(f"\nserver output ({server.backend}):\n{server.output}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_before": load_before, "load_after": load_after, "args": vars(args),
                       "scenarios": [asdict(s) for s in scenarios], "results": results,
                       "rss_mib": {b: s.rss_mib for b, s in servers.items()}}, f, indent=1)


if __name__ == "__main__":
    main()
