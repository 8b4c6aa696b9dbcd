"""`longdoc ui` as a real process: it serves on 127.0.0.1, and SIGTERM or SIGINT to its pid stops the
server — no Streamlit left serving under PID 1 (the process execs Streamlit instead of running it as
a child). Also the command line it builds: no source watching unless --dev."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from app.cli import streamlit_command

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def descendants(pid: int) -> list[int]:
    kids, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except OSError:
                    continue
                if ppid == parent:
                    kids.append(int(entry.name))
                    todo.append(int(entry.name))
    return kids


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_to_longdoc_ui_stops_the_server(tmp_path, sig):
    pytest.importorskip("streamlit")
    port = free_port()
    env = os.environ | {"PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "ui", "--port", str(port)], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not answers(port) and proc.poll() is None:
            time.sleep(0.2)
        assert answers(port), "longdoc ui never answered"
        kids = descendants(proc.pid)
        # it listens on the loopback only
        with pytest.raises(OSError), socket.create_connection((_outside_address(), port), timeout=1):
            pass
        proc.send_signal(sig)
        proc.wait(timeout=15)
        deadline = time.time() + 5
        while time.time() < deadline and (answers(port) or any(alive(k) for k in kids)):
            time.sleep(0.1)
        assert not answers(port), "something still serves on the port after the signal"
        assert not [k for k in kids if alive(k)], "a child of longdoc ui survived it"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _outside_address() -> str:
    """An address of this machine other than the loopback (to check nothing listens there)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: no packet is sent for a UDP connect
            addr = s.getsockname()[0]
        except OSError:
            addr = "127.0.0.1"
    if addr.startswith("127."):
        pytest.skip("this machine has no address besides the loopback")
    return addr


def test_the_command_watches_no_files_unless_dev_and_stays_on_the_loopback():
    cmd = streamlit_command(Path("streamlit_app.py"), 8600)
    opts = dict(zip(cmd[5::2], cmd[6::2], strict=False))
    assert opts["--server.address"] == "127.0.0.1" and opts["--server.port"] == "8600"
    assert opts["--server.fileWatcherType"] == "none" and opts["--server.runOnSave"] == "false"
    dev = streamlit_command(Path("streamlit_app.py"), 8600, "0.0.0.0", dev=True)
    opts = dict(zip(dev[5::2], dev[6::2], strict=False))
    assert opts["--server.fileWatcherType"] == "auto" and opts["--server.runOnSave"] == "true"
    assert opts["--server.address"] == "0.0.0.0"


def test_streamlit_app_docstring_points_at_longdoc_ui():
    doc = (ROOT / "streamlit_app.py").read_text(encoding="utf-8").split('"""')[1]
    assert "longdoc ui" in doc and "streamlit run streamlit_app.py" not in doc
