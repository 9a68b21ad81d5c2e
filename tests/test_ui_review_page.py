"""The review page in a real browser (headless Chromium): without the token it shows
nothing and takes no decision; signed in, approving a pending bash call and one file
of a dream from the page has the same effect as the command line, and agent-written
markup arrives as text. Each page is also photographed (into ``$LW_SCREENSHOTS``, e.g.
``docs/``, when set)."""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from temporalio.testing import WorkflowEnvironment

from lw_temporal import AgentResult
from lw_temporal._approvals._client import list_approvals
from lw_temporal.dreaming import DreamInput, DreamStatus, wait_for_review
from lw_temporal.ids import DataLayout
from lw_temporal.memory import MemoryStores, Provenance, StoreKind, StoreRef
from lw_temporal.testing import running_worker

from ._browser_support import Browser
from ._ui_support import DEFINITIONS, HIDDEN, MARKUP, model, review_page


def _post(url: str, fields: dict[str, str], headers: dict[str, str]) -> int:
    body = urlencode(fields).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    request.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as err:
        return int(err.code)


async def _until(predicate: Callable[[], Awaitable[bool]], what: str) -> None:
    for _ in range(300):
        if await predicate():
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


async def test_the_review_page_decides_like_the_cli(
    dev_env: WorkflowEnvironment, data_dir: Path, task_queue: str, browser: Browser, tmp_path: Path
) -> None:
    shots = Path(os.environ.get("LW_SCREENSHOTS") or tmp_path / "shots")
    layout = DataLayout.at(data_dir)
    async with running_worker(
        dev_env.client,
        data_dir=data_dir,
        definitions=DEFINITIONS,
        model=model(),
        task_queue=task_queue,
    ) as client:
        notes_run = f"run_ui-notes@{task_queue}"
        await client.execute_workflow(
            "lw.Planner", "Note it.", id=notes_run, task_queue=task_queue, result_type=AgentResult
        )
        dream_id = f"dream_ui-notes@{task_queue}"
        await client.start_workflow(
            "lw.Dreaming", DreamInput(target="ui-notes"), id=dream_id, task_queue=task_queue
        )
        waiting = await wait_for_review(client, dream_id)
        assert waiting.status is DreamStatus.AWAITING_APPROVAL
        assert sorted(c.path for c in waiting.changes) == ["consolidated.md", "failures.md"]
        shipper = f"run_ui-shipper@{task_queue}"
        shipped = await client.start_workflow(
            "lw.Planner", "Ship it.", id=shipper, task_queue=task_queue, result_type=AgentResult
        )

        async with review_page(dev_env, data_dir) as login:
            origin = f"{urlsplit(login).scheme}://{urlsplit(login).netloc}"
            page = await browser.page()
            try:
                # Without the token: nothing but the notice, on every page.
                for where in ("/", "/dreams", f"/dream?id={dream_id}", "/memory", "/runs"):
                    await page.goto(origin + where)
                    text = await page.text()
                    assert text.startswith("lw-temporal review page: not signed in"), text
                    assert shipper not in text and dream_id not in text
                assert _post(origin + "/approvals/decide", {"workflow_id": shipper}, {}) == 401
                await page.goto(f"{origin}/?token=wrong")
                assert "not signed in" in await page.text()

                # Signed in: the token leaves the address bar; the cookie is HttpOnly, Strict.
                await page.goto(login)
                assert await page.url() == origin + "/"

                async def listed() -> bool:
                    await page.goto(origin + "/")
                    return f"{shipper} · a2-" in await page.text()

                await _until(listed, "the request on the page")
                a1, a2 = (r.id for r in (await list_approvals(client, workflow_id=shipper)).pending)
                # A page's cookie is named after its port (other pages' may be there too).
                own = f"lw_review_{urlsplit(login).port}"
                [cookie] = [c for c in await page.cookies() if c["name"] == own]
                assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
                text = await page.text()
                assert f"{shipper} · {a1} · bash" in text
                assert MARKUP in text  # agent-written markup is text, not elements
                # A long command is shown cut, and whole from the run's conversation.
                assert f"{shipper} · {a2} · bash" in text
                assert "These arguments are cut for display" in text and HIDDEN not in text
                details = f"section[id='req-{shipper}-{a2}'] details"
                whole = await page.evaluate(f'document.querySelector("{details}").textContent')
                assert HIDDEN in whole and "its sha256 checked" in whole
                assert (
                    await page.evaluate("document.querySelectorAll('main img, main script').length")
                    == 0
                )
                session = f"{cookie['name']}={cookie['value']}"
                # A cross-site form with the cookie, and one without the form token, are refused.
                csrf = await page.evaluate("document.querySelector('input[name=csrf]').value")
                fields = {"workflow_id": shipper, "request_id": a1, "decision": "approve",
                          "reviewer": "mallory", "csrf": csrf}  # fmt: skip
                assert (
                    _post(
                        origin + "/approvals/decide",
                        fields,
                        {"Cookie": session, "Origin": "http://evil.example"},
                    )
                    == 403
                )
                stolen = {**fields, "csrf": "0" * 64}
                assert (
                    _post(
                        origin + "/approvals/decide", stolen, {"Cookie": session, "Origin": origin}
                    )
                    == 403
                )
                await page.screenshot(shots / "ui-approvals.png")
                await page.goto(f"{origin}/runs?id={shipper}")
                assert f"waiting for approval (bash {a1}" in await page.text()
                await page.screenshot(shots / "ui-tree.png")
                await page.goto(origin + "/")

                # Approve from the page: the command runs once, audited with the reviewer.
                card = f"section[id='req-{shipper}-{a1}']"
                await page.fill(f"{card} input[name=reviewer]", "carol")
                await page.fill(f"{card} input[name=why]", "release 4.2")
                await page.click(f"{card} button[value=approve]")
                assert f"{shipper} {a1}: approved by carol" in await page.text()
                card = f"section[id='req-{shipper}-{a2}']"
                await page.fill(f"{card} input[name=reviewer]", "carol")
                await page.fill(f"{card} input[name=why]", "what is that curl?")
                await page.click(f"{card} button[value=deny]")
                assert f"{shipper} {a2}: denied by carol" in await page.text()
                result = await shipped.result()
                assert result.summary == "shipped"
                scratch = layout.runs / shipper / "scratch"
                assert (scratch / "deploy.log").read_text() == f"{MARKUP} deploy\n"
                [record] = list((layout.state / "approvals").rglob(f"{a1}.json"))
                kept = json.loads(record.read_text())["record"]
                assert (kept["outcome"], kept["by"], kept["why"]) == (
                    "approved",
                    "carol",
                    "release 4.2",
                )

                # A dream: its files with their diffs and source runs; approve one file.
                await page.goto(origin + "/dreams")
                assert dream_id in await page.text()
                await page.screenshot(shots / "ui-dreams.png")
                await page.goto(f"{origin}/dream?id={dream_id}")
                text = await page.text()
                assert "ui-notes/consolidated.md" in text and "ui-notes/failures.md" in text
                assert f"From runs: {notes_run}" in text
                assert "+# Lessons consolidated from 1 runs" in text
                await page.screenshot(shots / "ui-dream.png")
                await page.check("input[name=file][value='consolidated.md']")
                await page.fill("input[name=reviewer]", "dana")
                await page.click("button[value=approve]")
                assert f"{dream_id}: consolidated.md promoted by dana" in await page.text()
                target = layout.workflow_memory("ui-notes")
                assert (target / "consolidated.md").read_text().startswith("# Lessons consolidated")
                assert not (target / "failures.md").exists()

                # Memory: the store, its audit naming the approver, a file's versions and diff.
                await page.goto(origin + "/memory")
                assert "workflow:ui-notes" in await page.text()
                await page.screenshot(shots / "ui-memory.png")
                await page.goto(origin + "/memory/store?store=workflow:ui-notes")
                text = await page.text()
                assert "consolidated.md" in text and "lessons.md" in text
                assert "dana" in text  # the promotion's audit line names the reviewer
                await page.screenshot(shots / "ui-store.png")
                stores = MemoryStores(layout)
                lessons = StoreRef(StoreKind.WORKFLOW, "ui-notes")
                added = b"- <b>ask</b> first\n"
                stores.append(lessons, "lessons.md", added, provenance=Provenance.admin("ops"))
                await page.goto(origin + "/memory/file?store=workflow:ui-notes&path=lessons.md")
                # Newest first: "from" the older version, "to" the newer one.
                await page.evaluate("document.querySelectorAll('input[name=a]')[1].checked = true")
                await page.evaluate("document.querySelectorAll('input[name=b]')[0].checked = true")
                await page.click("form[action='/memory/file'] button")
                text = await page.text()
                assert "+- <b>ask</b> first" in text and " - check twice" in text, text
                assert await page.evaluate("document.querySelectorAll('main b').length") == 0
                await page.screenshot(shots / "ui-file.png")

                # Runs: the recorded ones, each with its tree and manifest.
                await page.goto(origin + "/runs")
                assert shipper in await page.text()
                await page.goto(f"{origin}/runs?id={shipper}")
                assert f"{shipper}  planner ui-shipper  finished" in await page.text()
            finally:
                await page.close()
