"""Open every page of the built docs site in headless Chromium and check it.

    python docs/_tools/check_site.py [SITE_DIR] [--screenshot PNG URLPATH]

Serves ``SITE_DIR`` (default ``site/``, written by ``mkdocs build``) on
127.0.0.1 at an ephemeral port, loads each page in Debian's Chromium and reads
the page as the browser built it (the DOM after its scripts ran).  Exits 1
with a list of problems if:

* a page does not load (a navigation error, no content, a resource answered
  with an HTTP error or failing to load, an image that does not decode);
* a link inside the site points at a page or file that does not exist, or at
  a ``#fragment`` that is no element's id on the target page;
* a link leaves the site other than by http(s) to a host in ``KNOWN_HOSTS``,
  or a page fetches anything from outside the site (the site must work with no
  network: no web fonts, no scripts from a CDN);
* a public name has no entry in the API reference: every name in ``__all__`` of
  every public module (``PUBLIC_MODULES`` of ``tests/test_public_api.py`` and
  the modules the reference is generated for, the live lists) needs an element
  with id ``<module>.<name>`` on the page ``reference/<module>/``.

One Chromium serves every page, driven through the DevTools protocol over a
pipe (``--remote-debugging-pipe``; the standard library is enough): starting
Chromium costs 1.5-2 s on a 2-core machine, which ``--dump-dom`` would pay per
page, about three minutes for the site's ~85 pages against ~20 s this way.
``--screenshot`` saves one page as a PNG.
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import functools
import importlib
import importlib.util
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

__all__ = ["KNOWN_HOSTS", "check_site", "expected_entries", "main", "screenshot"]

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
# The flags every Chromium started here gets: no sandbox (CI containers run as
# root), no GPU, and nothing that would reach the network on its own.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
# Hosts the pages may link to (links only: nothing is fetched from them).
KNOWN_HOSTS = frozenset({"huggingface.co", "pytorch.org", "docs.pytorch.org", "docs.python.org", "github.com",
                         "squidfunk.github.io"})
PAGE_TIMEOUT_S = 60.0
# What the checks need from a page, read after it loaded.
_READ_PAGE = """JSON.stringify({
  ids: Array.from(document.querySelectorAll("[id]"), e => e.id),
  links: Array.from(document.querySelectorAll("a[href]"), a => a.href),
  content: document.querySelector("article") !== null,
  badImages: Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src),
})"""


class PageError(Exception):
    """A page that Chromium could not navigate to."""


def _above_9(fd: int) -> int:
    """``fd`` moved to a number above 9 (the old one closed)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class Browser:
    """One headless Chromium with one tab, driven through the DevTools protocol
    over a pipe: Chromium reads commands from its fd 3 and writes replies and
    events to its fd 4, each a JSON message ended by a NUL byte."""

    def __init__(self, profile: str) -> None:
        commands_in, commands_out = os.pipe()
        self._replies, replies_out = os.pipe()
        # bash puts the pipe's ends on fds 3 and 4 and becomes Chromium; the
        # ends are moved above 9 first, so that neither redirection overwrites
        # the other's source (and bash, unlike dash, takes such numbers).
        commands_in, replies_out = _above_9(commands_in), _above_9(replies_out)
        argv = ["bash", "-c", f'exec "$0" "$@" 3<&{commands_in} 4>&{replies_out}', CHROMIUM, *FLAGS,
                f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        self._process = subprocess.Popen(argv, pass_fds=(commands_in, replies_out), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(commands_in)
        os.close(replies_out)
        self._commands = os.fdopen(commands_out, "wb")
        self._buffer = b""
        self._last_id = 0
        self._events: list[dict[str, Any]] = []
        self._session = ""
        try:
            target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
            self._session = self._call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self._call("Page.enable", session=True)
            self._call("Network.enable", session=True)
        except BaseException:
            self.close()
            raise

    def _receive(self, deadline: float) -> dict[str, Any]:
        """The next message from Chromium, waiting until ``deadline`` at most."""
        while b"\0" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("Chromium did not answer in time")
            if select.select([self._replies], [], [], remaining)[0]:
                chunk = os.read(self._replies, 1 << 20)
                if not chunk:
                    raise ConnectionError("Chromium exited")
                self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def _call(self, method: str, params: dict[str, Any] | None = None, *, session: bool = False,
              timeout: float = PAGE_TIMEOUT_S) -> dict[str, Any]:
        """Send one command and return its result; events meanwhile are kept."""
        self._last_id += 1
        message: dict[str, Any] = {"id": self._last_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        self._commands.write(json.dumps(message).encode() + b"\0")
        self._commands.flush()
        deadline = time.monotonic() + timeout
        while True:
            reply = self._receive(deadline)
            if reply.get("id") != self._last_id:
                self._events.append(reply)
            elif "error" in reply:
                raise PageError(f"{method}: {reply['error'].get('message')}")
            else:
                return reply["result"]

    def _event(self, method: str, deadline: float) -> dict[str, Any]:
        """The first event ``method`` of the tab, received already or next."""
        while True:
            for event in self._events:
                if event.get("method") == method and event.get("sessionId") == self._session:
                    return event
            self._events.append(self._receive(deadline))

    def open(self, base: str, page: str) -> tuple[dict[str, Any], list[str]]:
        """Load ``page`` (a URL path) of the site at ``base``; return what
        ``_READ_PAGE`` reads from it, and the problems of the resources it
        fetched while loading."""
        self._events.clear()
        result = self._call("Page.navigate", {"url": base + page}, session=True)
        if "errorText" in result:
            raise PageError(result["errorText"])
        self._event("Page.loadEventFired", time.monotonic() + PAGE_TIMEOUT_S)
        value = self._call("Runtime.evaluate", {"expression": _READ_PAGE, "returnByValue": True}, session=True)
        return json.loads(value["result"]["value"]), _resource_problems(self._events, base)

    def screenshot(self, base: str, page: str, png: Path) -> None:
        """Save ``page`` of the site at ``base`` as seen in a 1280x1000 window."""
        self._call("Emulation.setDeviceMetricsOverride",
                   {"width": 1280, "height": 1000, "deviceScaleFactor": 1, "mobile": False}, session=True)
        self.open(base, page)
        data = self._call("Page.captureScreenshot", {"format": "png"}, session=True)["data"]
        png.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            self._call("Browser.close", timeout=10)
        except (OSError, TimeoutError, PageError):
            pass  # a browser that exited (or never started) is closed already
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._commands.close()
        os.close(self._replies)


def _shown(url: str, base: str) -> str:
    """``url`` as a problem shows it: a path for the site's own URLs."""
    return url.removeprefix(base) or "/"


def _resource_problems(events: list[dict[str, Any]], base: str) -> list[str]:
    """From the Network events of one page load: fetches from outside the site,
    HTTP errors and resources that failed to load."""
    urls: dict[str, str] = {}
    problems = []
    for event in events:
        params = event.get("params", {})
        if event.get("method") == "Network.requestWillBeSent":
            url = params["request"]["url"]
            urls[params["requestId"]] = url
            if urlsplit(url).scheme in ("http", "https") and not url.startswith(base + "/"):
                problems.append(f"fetches {url} from outside the site")
        elif event.get("method") == "Network.responseReceived" and params["response"]["status"] >= 400:
            problems.append(f"{_shown(params['response']['url'], base)}: HTTP {params['response']['status']}")
        elif event.get("method") == "Network.loadingFailed" and not params.get("canceled"):
            problems.append(f"{_shown(urls.get(params['requestId'], '?'), base)}: {params.get('errorText')}")
    return problems


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No access log: the checks report what matters."""


@contextmanager
def serve(site: Path) -> Iterator[str]:
    """Serve ``site`` on 127.0.0.1 at an ephemeral port; yield its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, name="check-site-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def site_pages(site: Path) -> list[str]:
    """The URL path of every page of the built site (``x/index.html`` is ``/x/``);
    ``404.html`` is left out: it is served for missing paths, at any depth."""
    paths = (index.parent.relative_to(site).as_posix() for index in site.rglob("index.html"))
    return sorted("/" if path == "." else f"/{path}/" for path in paths)


def _load(path: Path, name: str) -> Any:
    """Import the file ``path`` as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expected_entries() -> dict[str, list[str]]:
    """For each public module's reference page (its URL path), the ids its
    entries must have: ``<module>.<name>`` for every name in ``__all__``."""
    sys.path.insert(0, str(REPO))
    try:
        listed = importlib.import_module("tests.test_public_api").PUBLIC_MODULES
        generated = _load(REPO / "docs" / "_hooks" / "api_reference.py", "_check_site_api_reference")
    finally:
        sys.path.remove(str(REPO))
    modules = sorted(set(listed) | set(generated.public_modules()))
    return {f"/{generated.REFERENCE_DIR}/{module}/": [f"{module}.{name}" for name in generated.public_names(module)]
            for module in modules}


def _link_problem(href: str, base: str, site: Path, ids: dict[str, set[str]]) -> str | None:
    """What is wrong with a link found on a page, or ``None``."""
    parts = urlsplit(href)
    if parts.scheme in ("http", "https") and parts.netloc != urlsplit(base).netloc:
        return None if parts.hostname in KNOWN_HOSTS else f"link to an unknown host: {href}"
    if parts.scheme not in ("http", "https"):
        return f"link that is not http(s): {href}"
    path = unquote(parts.path)
    if not path.endswith("/") and (site / path.lstrip("/")).is_dir():
        path += "/"
    if path not in ids:
        return None if (site / path.lstrip("/")).is_file() else f"broken link: {path}"
    fragment = unquote(parts.fragment)
    if fragment and fragment not in ids[path]:
        return f"missing anchor: {path}#{fragment}"
    return None


def check_site(site: Path, entries: dict[str, list[str]]) -> list[str]:
    """Every problem found on the site at ``site``, one line each; ``entries``:
    the ids each page must have (``expected_entries()``)."""
    pages = site_pages(site)
    ids: dict[str, set[str]] = {}
    links: dict[str, set[str]] = {}
    found: dict[str, list[str]] = defaultdict(list)  # problem -> the pages with it
    with serve(site) as base, tempfile.TemporaryDirectory(prefix="check-site-") as profile:
        browser = Browser(profile)
        try:
            for n, page in enumerate(pages, 1):
                print(f"[{n}/{len(pages)}] {page}", flush=True)
                try:
                    data, resources = browser.open(base, page)
                except (PageError, TimeoutError) as error:
                    found[f"page does not load: {error}"].append(page)
                    continue
                ids[page] = set(data["ids"])
                links[page] = set(data["links"])
                if not data["content"]:
                    found["page has no content (no <article>)"].append(page)
                for problem in resources + [f"image does not load: {src}" for src in data["badImages"]]:
                    found[problem].append(page)
        finally:
            browser.close()
        for page, hrefs in links.items():
            for href in sorted(hrefs):
                if (link_problem := _link_problem(href, base, site, ids)) is not None:
                    found[link_problem].append(page)
    for page, wanted in entries.items():
        missing = [entry for entry in wanted if entry not in ids.get(page, ())]
        if missing:
            found[f"no reference entry on {page} for: {', '.join(missing)}"].append(page)
    return [f"{problem} (on {len(on)} page(s), e.g. {on[0]})" for problem, on in sorted(found.items())]


def screenshot(site: Path, png: Path, page: str) -> None:
    """Save the page at URL path ``page`` (a ``#fragment`` scrolls to it) as a 1280x1000 PNG."""
    with serve(site) as base, tempfile.TemporaryDirectory(prefix="check-site-") as profile:
        browser = Browser(profile)
        try:
            browser.screenshot(base, page, png)
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", nargs="?", type=Path, default=REPO / "site", help="the built site (default: site/)")
    parser.add_argument("--screenshot", nargs=2, metavar=("PNG", "URLPATH"),
                        help="also save the page at URLPATH (e.g. /reference/agrad.nn/) as PNG")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        parser.error(f"{args.site} is not a built site (no index.html); run mkdocs build first")
    started = time.monotonic()
    problems = check_site(args.site, expected_entries())
    if args.screenshot:
        png, page = args.screenshot
        screenshot(args.site, Path(png), page)
        print(f"screenshot of {page}: {png}")
    pages = len(site_pages(args.site))
    if problems:
        print(f"FAILED: {len(problems)} problem(s) in {pages} pages:", *problems, sep="\n  ")
        return 1
    print(f"OK: {pages} pages, links, anchors and API entries checked in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
