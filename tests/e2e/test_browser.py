"""End to end: `streamlit run` on 127.0.0.1, driven by a real headless Chromium through Playwright.
Loads the bundled patent sample on the patents page and checks that the claim tree is drawn.

Skips (with the reason) only where no Chromium is installed; scripts/test.sh installs Debian's
chromium when it runs as root.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
LAUNCH_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (scripts/test.sh installs it with apt-get as root)"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    port = _free_port()
    env = os.environ.copy()
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "streamlit_app.py"), "--server.address", "127.0.0.1",
         "--server.port", str(port), "--server.headless", "true", "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("streamlit did not start: " + proc.stdout.read().decode(errors="replace")[-2000:])
    yield f"http://127.0.0.1:{port}"
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()


def test_patent_sample_shows_tree(server, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=LAUNCH_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.goto(f"{server}/patents", wait_until="domcontentloaded")
            page.get_by_role("tab", name="Bundled sample").click(timeout=30000)
            page.get_by_role("button", name="Analyse the sample").click(timeout=30000)
            page.get_by_role("heading", name="Claim tree", exact=True).wait_for(timeout=60000)
            # the tree is drawn as an SVG by the graphviz chart, one node per claim
            page.locator("svg g.node").first.wait_for(timeout=60000)
            nodes = page.locator("svg g.node").count()
            assert nodes >= 2
            assert page.get_by_text("Independent").count() >= 1
            shot = Path(os.environ.get("LONGDOC_SCREENSHOTS", tmp_path)) / "patents_page.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
