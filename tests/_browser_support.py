"""Headless Chromium driven over the DevTools protocol, for the review page's tests.

Debian's ``chromium`` (installed by ``make setup``) started with
``--remote-debugging-pipe``: the protocol runs over two pipes (commands on fd 3, replies
on fd 4, each message JSON ended by a NUL byte), so the tests need no websocket client,
no driver binary and no browser download, and nothing listens on a port. One browser
serves the whole session; each test opens its own page (target) in it.
"""

from __future__ import annotations

import asyncio
import base64
import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

CHROMIUM = "/usr/bin/chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",  # as root; the page under test is our own
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--remote-debugging-pipe",
)
TIMEOUT = 30.0


def _high(fd: int) -> int:
    """``fd`` moved to 10 or above (close-on-exec), so the shell can map it to 3 or 4."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


class Browser:
    """One Chromium process and its protocol pipes."""

    def __init__(self, process: asyncio.subprocess.Process, writer: int, profile: str) -> None:
        self.process = process
        self._writer = writer
        self._profile = profile
        self._next = 0
        self._replies: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._waiters: list[tuple[str, str | None, asyncio.Future[dict[str, Any]]]] = []
        self._reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(cls) -> Browser:
        commands_read, commands_write = map(_high, os.pipe())
        replies_read, replies_write = map(_high, os.pipe())
        profile = tempfile.mkdtemp(prefix="lw-chromium-")
        script = f'exec "$@" 3<&{commands_read} 4>&{replies_write}'
        process = await asyncio.create_subprocess_exec(
            "/bin/bash",
            "-c",
            script,
            "chromium",
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            "about:blank",
            pass_fds=(commands_read, replies_write),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        os.close(commands_read)
        os.close(replies_write)
        browser = cls(process, commands_write, profile)
        reader = asyncio.StreamReader(limit=64 * 1024 * 1024)
        loop = asyncio.get_running_loop()
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(replies_read, "rb", 0)
        )
        browser._reader = asyncio.create_task(browser._read(reader))
        return browser

    async def _read(self, reader: asyncio.StreamReader) -> None:
        while True:
            try:
                raw = await reader.readuntil(b"\0")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                return
            message = json.loads(raw[:-1])
            if "id" in message:
                future = self._replies.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_result(message)
                continue
            for waiter in list(self._waiters):
                method, session, future = waiter
                if message.get("method") == method and message.get("sessionId") == session:
                    self._waiters.remove(waiter)
                    if not future.done():
                        future.set_result(message.get("params", {}))

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._replies[self._next] = future
        os.write(self._writer, json.dumps(message).encode() + b"\0")
        reply = await asyncio.wait_for(future, TIMEOUT)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        result: dict[str, Any] = reply.get("result", {})
        return result

    def expect(self, method: str, session: str | None) -> asyncio.Future[dict[str, Any]]:
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters.append((method, session, future))
        return future

    async def page(self, width: int = 1100, height: int = 760) -> Page:
        target = (await self.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
        attached = await self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        page = Page(self, target, attached["sessionId"])
        await page.send("Page.enable")
        await page.send("Network.enable")
        await page.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )
        return page

    async def close(self) -> None:
        try:
            await self.send("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            self.process.kill()
        await asyncio.wait_for(self.process.wait(), TIMEOUT)
        if self._reader is not None:
            self._reader.cancel()
        os.close(self._writer)
        shutil.rmtree(self._profile, ignore_errors=True)


class Page:
    """One tab: navigate, read, fill and submit forms, take screenshots."""

    def __init__(self, browser: Browser, target: str, session: str) -> None:
        self.browser = browser
        self.target = target
        self.session = session

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.browser.send(method, params, self.session)

    async def goto(self, url: str) -> None:
        loaded = self.browser.expect("Page.loadEventFired", self.session)
        await self.send("Page.navigate", {"url": url})
        await asyncio.wait_for(loaded, TIMEOUT)

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def text(self) -> str:
        value = await self.evaluate("document.body ? document.body.innerText : ''")
        return str(value)

    async def url(self) -> str:
        return str(await self.evaluate("location.href"))

    async def fill(self, selector: str, value: str) -> None:
        found = await self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            f" if (!e) return false; e.value = {json.dumps(value)}; return true; }})()"
        )
        assert found, f"no element {selector} on {await self.url()}"

    async def check(self, selector: str) -> None:
        found = await self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return false; e.checked = true; return true; })()"
        )
        assert found, f"no element {selector} on {await self.url()}"

    async def click(self, selector: str) -> None:
        """Click (a submit button: wait for the page it leads to)."""
        loaded = self.browser.expect("Page.loadEventFired", self.session)
        found = await self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " if (!e) return false; e.click(); return true; })()"
        )
        assert found, f"no element {selector} on {await self.url()}"
        await asyncio.wait_for(loaded, TIMEOUT)

    async def cookies(self) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = (await self.send("Network.getCookies"))["cookies"]
        return found

    async def screenshot(self, path: Path) -> None:
        shot = await self.send("Page.captureScreenshot", {"format": "png"})
        data = base64.b64decode(shot["data"])

        def save() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

        await asyncio.to_thread(save)

    async def close(self) -> None:
        await self.browser.send("Target.closeTarget", {"targetId": self.target})
