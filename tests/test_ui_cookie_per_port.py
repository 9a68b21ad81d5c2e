"""Two review pages on one host keep their sessions apart.

A browser keeps cookies per host, not per port: when every page named its session
cookie ``lw_review``, signing in to a second page (another deployment's, on another
port of the same host) replaced the first page's cookie, and the first page's
reviewer was signed out in the middle of a review. Each page names its cookie after
its port, so both sessions hold, in one headless Chromium.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from temporalio.testing import WorkflowEnvironment

from ._browser_support import Browser
from ._ui_support import review_page


def _origin(login: str) -> str:
    parts = urlsplit(login)
    return f"{parts.scheme}://{parts.netloc}"


async def test_signing_in_to_a_second_page_keeps_the_first_signed_in(
    dev_env: WorkflowEnvironment, data_dir: Path, tmp_path: Path, browser: Browser
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    async with review_page(dev_env, data_dir) as first, review_page(dev_env, other) as second:
        page = await browser.page()
        try:
            await page.goto(first)
            await page.goto(_origin(first) + "/memory")
            assert "not signed in" not in await page.text()
            await page.goto(second)
            await page.goto(_origin(second) + "/memory")
            assert "not signed in" not in await page.text()
            # Back to the first page: its session is still there.
            await page.goto(_origin(first) + "/memory")
            text = await page.text()
            assert "not signed in" not in text, text
            names = {c["name"] for c in await page.cookies() if c["domain"] == "127.0.0.1"}
            ports = {f"lw_review_{urlsplit(u).port}" for u in (first, second)}
            assert ports <= names, names
        finally:
            await page.close()
