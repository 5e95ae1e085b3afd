"""The Knowledge page in a real headless Chromium (Debian's, driven by Playwright) against the API
served by uvicorn: search, open an entity, see its relationships listed and drawn, merge and edit."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from agtos.memory.coordinator import MemoryCoordinator
from agtos.schemas import EntityType
from agtos.serving.app import create_app

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).parent / "artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
USER = "kp-user"
THANKS = [{"role": "assistant", "content": "Got it."}, {"role": "user", "content": "Thanks, keep that in mind."}]

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)"
)
STATIC = Path(__file__).parents[1] / "agtos" / "serving" / "static" / "knowledge"


def test_page_is_served_and_fully_offline(client: TestClient) -> None:
    page = client.get("/knowledge/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert '<input id="search"' in page.text and '<canvas id="graph"' in page.text
    for name in ("app.js", "graph.js", "style.css"):
        asset = client.get(f"/knowledge/{name}")
        assert asset.status_code == 200 and asset.text
    for path in STATIC.iterdir():  # no CDN, font or script from anywhere else
        text = path.read_text()
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", text, re.I), path.name


def test_every_entity_type_has_a_colour_a_legend_entry_and_a_filter() -> None:
    html = (STATIC / "index.html").read_text()
    css = (STATIC / "style.css").read_text()
    graph = (STATIC / "graph.js").read_text()
    types = [t.value for t in EntityType]
    assert {"person", "place", "organization", "event", "thing", "animal"} <= set(types)
    for etype in types:
        assert f'<li data-type="{etype}"><span class="dot {etype}">' in html, etype
        assert f'<option value="{etype}">' in html and f"<option>{etype}</option>" in html, etype
        assert re.search(rf"--{etype}: #[0-9a-f]{{6}};", css) and f".badge.{etype} {{" in css, etype
        assert re.search(rf"\b{etype}: \"#[0-9a-f]{{6}}\"", graph), etype


@pytest.fixture
def base_url(coordinator: MemoryCoordinator) -> Iterator[str]:
    """The app on a free loopback port, served by uvicorn in a thread."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(coordinator=coordinator), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "uvicorn did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)
    sock.close()


def say(base_url: str, session_id: str, text: str) -> None:
    """One session through the real API: the user's turn, a short reply, then session end."""
    headers = {"X-User-Id": USER}
    with httpx.Client(base_url=base_url, headers=headers, timeout=30) as http:
        turns = [{"role": "user", "content": text}, *THANKS]
        assert http.post(f"/api/memory/sessions/{session_id}/turns", json={"turns": turns}).status_code == 200
        ended = http.post(f"/api/memory/sessions/{session_id}/end").json()
        assert ended["saved"], ended


@needs_chromium
def test_knowledge_page_search_detail_graph_merge_and_edit(base_url: str) -> None:
    from playwright.sync_api import expect, sync_playwright

    say(base_url, "kp-1", "Alice works at Acme Corp in Berlin; her project Falcon is due Friday.")
    say(base_url, "kp-2", "Alice Smith lives in Berlin.")
    foreign: list[str] = []
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(15_000)
            page.on("request", lambda r: foreign.append(r.url) if not r.url.startswith(base_url) else None)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{base_url}/knowledge")
            expect(page.locator("#user")).to_have_value("default")
            page.fill("#user", USER)
            page.press("#user", "Enter")
            expect(page.locator("#stats")).to_contain_text("entities")

            page.fill("#search", "Ali")
            items = page.locator("#entity-list li")
            expect(items).to_have_count(2)  # Alice and Alice Smith (prefix "ali")
            page.locator("#entity-list li", has_text="Alice").filter(has_not_text="Smith").click()
            expect(page.locator("#entity-name")).to_have_text("Alice")
            works = page.locator('#relationships li[data-type="works-at"]')
            expect(works).to_contain_text("Acme Corp")
            graph = page.locator("#graph")
            expect(graph).to_have_attribute("data-settled", "true")
            assert int(graph.get_attribute("data-nodes") or 0) >= 3  # Alice, Acme Corp, Falcon
            assert "Acme Corp" in (graph.get_attribute("data-labels") or "").split("|")
            inked = page.evaluate(
                """() => { const c = document.getElementById('graph');
                const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i] > 0) n++; return n; }"""
            )
            assert inked > 2_000, "the relationship graph was not drawn"
            expect(page.locator("#episodes")).to_contain_text("Alice works at Acme Corp")
            legend = page.locator("#graph-legend li")
            expect(legend).to_have_count(6)
            dot = page.locator('#graph-legend li[data-type="animal"] .dot')
            assert dot.evaluate("d => getComputedStyle(d).backgroundColor") == "rgb(14, 154, 167)"  # #0e9aa7

            page.select_option("#merge-select", label="Alice Smith (person)")
            page.click("#merge-form button[type=submit]")
            expect(page.locator("#toast")).to_contain_text("Merged")
            expect(page.locator('#relationships li[data-type="lives-in"]')).to_contain_text("Berlin")
            expect(page.locator("#entity-meta")).to_contain_text("Alice Smith")
            expect(items).to_have_count(1)

            page.click("#edit-btn")
            expect(page.locator("#edit-name")).to_have_value("Alice")
            page.fill("#edit-aliases", "Alice Smith, Ally")
            page.click("#edit-form button[type=submit]")
            expect(page.locator("#toast")).to_contain_text("Saved")
            expect(page.locator("#entity-meta")).to_contain_text("Alice Smith, Ally")
            expect(page.locator("#edit-form")).to_be_hidden()
            expect(graph).to_have_attribute("data-settled", "true")

            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "knowledge.png"), full_page=True)
        finally:
            browser.close()
    assert not errors, errors
    assert not foreign, f"the page reached outside the app: {foreign}"
