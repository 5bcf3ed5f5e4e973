"""A new user's whole story per harness, on a fresh home, with the processes' real environments.

The product once lost every capture of a custom home silently: the shell that ran ``install``
had ``REFLECT_HOME``, the harness running the hook and the service manager running the
worker did not. Here ``REFLECT_HOME``/``GLOBAL_LEARNINGS_PATH`` are set for ``install`` only;
then the hook commands ``install`` wrote run with an environment holding only ``HOME`` and
``PATH`` (as a harness may), the service's own command line drains (with the unit's own
environment), the next session start is told the learning, and ``uninstall --purge --yes``
leaves the home exactly as it was before ``install`` (compared with ``find``).

``PYTHONPATH`` is passed through when the test process has it: it selects the checkout under
test, not a setting (a user's install has no such variable).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path

import pytest
from support import BIN, DATA, write_claude_transcript

from reflect_jobs.install.inventory import read_service

SAMPLES = {
    "codex": DATA / "transcripts" / "codex-rollout.jsonl",
    "copilot": DATA / "transcripts" / "copilot-events.jsonl",
}


def _bare(home: Path, path: str) -> dict[str, str]:
    env = {"HOME": str(home), "PATH": path}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _tree(root: Path) -> list[str]:
    out = subprocess.run(["find", str(root)], capture_output=True, text=True, check=True).stdout
    return sorted(line[len(str(root)) :] or "/" for line in out.splitlines())


def _stub_systemctl(tmp_path: Path) -> Path:
    """A ``systemctl`` that records its arguments and says the unit is active."""
    bin_dir = tmp_path / "stub-bin"
    bin_dir.mkdir()
    log = tmp_path / "systemctl.log"
    stub = bin_dir / "systemctl"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexit 0\n')
    stub.chmod(stub.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def _session(harness: str, home: Path, cwd: Path) -> tuple[str, dict]:
    """Put a transcript where the harness keeps it; the event and payload its end sends."""
    if harness == "claude":
        path = home / ".claude" / "projects" / "-proj" / "s-claude.jsonl"
        payload = {"session_id": "s-claude", "transcript_path": str(path), "cwd": str(cwd)}
        event = "SessionEnd"
    elif harness == "codex":
        path = home / ".codex" / "sessions" / "2026" / "07" / "01" / "rollout-s-codex.jsonl"
        payload = {
            "session_id": "s-codex",
            "transcript_path": str(path),
            "cwd": str(cwd),
            "hook_event_name": "SessionEnd",
        }
        event = "SessionEnd"
    else:  # Copilot's sessionEnd names no transcript: it is found by the session id
        path = home / ".copilot" / "session-state" / "s-copilot" / "events.jsonl"
        payload = {"sessionId": "s-copilot", "timestamp": 1704618000000, "cwd": str(cwd)}
        event = "sessionEnd"
    path.parent.mkdir(parents=True, exist_ok=True)
    if harness == "claude":
        write_claude_transcript(
            path, ["No, never use a bare except; catch the exception you expect."]
        )
    else:  # the session ran in the project (the codex sample says /repo)
        text = SAMPLES[harness].read_text()
        path.write_text(
            text.replace('"/repo"', json.dumps(str(cwd))).replace(">/repo<", f">{cwd}<")
        )
    return event, payload


def _installed_command(harness: str, home: Path, event: str) -> str:
    if harness == "claude":
        doc = json.loads((home / ".claude" / "settings.json").read_text())
        return doc["hooks"][event][0]["hooks"][0]["command"]
    if harness == "codex":
        doc = json.loads((home / ".codex" / "hooks.json").read_text())
        return doc["hooks"][event][0]["hooks"][0]["command"]
    doc = json.loads((home / ".copilot" / "hooks" / "reflect-jobs.json").read_text())
    return doc["hooks"][event][0]["bash"]


def _run_hook(command: str, payload: dict, env: dict[str, str]) -> str:
    proc = subprocess.run(
        command,
        shell=True,
        input=json.dumps(payload),
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0 and proc.stderr == "", proc
    return proc.stdout


def _mcp_context(home: Path, bare: dict[str, str], cwd: Path) -> str:
    """Copilot discards hook output: its session is told through the installed MCP entry."""
    mcp = pytest.importorskip("mcp")
    from mcp.client.stdio import StdioServerParameters, stdio_client

    entry = json.loads((home / ".copilot" / "mcp-config.json").read_text())["mcpServers"][
        "reflect-jobs"
    ]
    # The harness starts the server in the session's working directory: that is the
    # repository it serves (ARCHITECTURE §13, reads limited to it and the globals).
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={**bare, **entry["env"]}, cwd=str(cwd)
    )

    async def ask() -> str:
        async with stdio_client(params) as (r, w), mcp.ClientSession(r, w) as session:
            await session.initialize()
            result = await session.call_tool("context", {"cwd": str(cwd)})
            return "".join(getattr(c, "text", "") for c in result.content)

    return asyncio.run(asyncio.wait_for(ask(), timeout=90))


@pytest.mark.parametrize("harness", ["claude", "codex", "copilot"])
def test_fresh_home_install_capture_drain_recall_then_purge(harness, tmp_path):
    home = tmp_path / "home"
    for d in (".config", f".{harness}"):  # what a machine with the harness already has
        (home / d).mkdir(parents=True)
    project = home / "work" / "proj"
    project.mkdir(parents=True)
    event, payload = _session(harness, home, project)
    before = _tree(home)

    stubs = _stub_systemctl(tmp_path)
    path = f"{stubs}:/usr/bin:/bin"
    bare = _bare(home, path)
    custom_home, custom_kb = home / "reflect-state", home / "learnings"
    installing = {
        **bare,
        "REFLECT_HOME": str(custom_home),
        "GLOBAL_LEARNINGS_PATH": str(custom_kb),
        "REFLECT_WRITER_BACKEND": "heuristic",
    }
    rj = str(BIN / "reflect-jobs")
    for args in (["install", "hooks", "--harness", harness], ["install", "service", "--systemd"]):
        proc = subprocess.run([rj, *args], env=installing, capture_output=True, text=True)
        assert proc.returncode == 0, proc
    config = home / ".config" / "reflect-jobs" / "config.toml"
    assert f'home = "{custom_home}"' in config.read_text()
    # a person tuning the file: no vector model, no settle delay
    with config.open("a") as fh:
        fh.write("index_vectors = false\ncapture_settle_sec = 0\n")

    # the harness runs the installed hook with its own bare environment
    assert _run_hook(_installed_command(harness, home, event), payload, bare) == ""
    spooled = list((custom_home / "spool").glob("*.json"))
    assert len(spooled) == 1, "captured into the configured home"
    assert not (home / ".reflect").exists(), "never into ~/.reflect"

    # the service manager runs the unit's command line with the unit's environment
    unit = read_service("systemd", home / ".config" / "systemd" / "user" / "reflect-jobs.service")
    assert unit.argv == [str(BIN / "reflect-jobs"), "worker"], unit
    extra = {"PYTHONPATH": bare["PYTHONPATH"]} if "PYTHONPATH" in bare else {}
    worker = subprocess.Popen(
        unit.argv,
        env={**unit.env, "HOME": str(home), **extra},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        told = ""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and "lrn-" not in told:
            time.sleep(0.5)
            # The heuristic writer's learning waits for review (ARCHITECTURE §7.1): the
            # person accepts it, as the installed CLI with the bare environment.
            waiting = subprocess.run(
                [rj, "review", "--json"], env=bare, capture_output=True, text=True
            )
            for item in json.loads(waiting.stdout or "[]") if waiting.returncode == 0 else []:
                subprocess.run([rj, "review", "accept", item["id"]], env=bare, check=True)
            if harness == "copilot":
                # Copilot CLI injects a sessionStart hook's {"additionalContext"} (1.0.11+);
                # its MCP entry answers too.
                start = {"sessionId": "s-next", "timestamp": 1, "cwd": str(project)}
                told = _run_hook(_installed_command(harness, home, "sessionStart"), start, bare)
                if told:
                    assert list(json.loads(told)) == ["additionalContext"], told
                    assert "lrn-" in _mcp_context(home, bare, project)
            else:
                start = {
                    "session_id": "s-next",
                    "hook_event_name": "SessionStart",
                    "cwd": str(project),
                    "source": "startup",
                }
                told = _run_hook(_installed_command(harness, home, "SessionStart"), start, bare)
        assert "lrn-" in told and "bare except" in told.lower(), told
        status = subprocess.run([rj, "status", "--json"], env=bare, capture_output=True, text=True)
        data = json.loads(status.stdout)
        assert data["counts"]["done"] == 1 and data["hook_errors"] == 0
        (w,) = [c for c in data["workers"] if c["kind"] == "worker"]
        assert (w["home"], w["writer_backend"], w["pid"]) == (
            str(custom_home),
            "heuristic",
            worker.pid,
        )
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()

    proc = subprocess.run(
        [rj, "uninstall", "--purge", "--yes"], env=bare, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc
    assert f"deleted {custom_home}" in proc.stdout and f"deleted {custom_kb}" in proc.stdout
    assert "disable --now reflect-jobs.service" in (tmp_path / "systemctl.log").read_text()
    assert _tree(home) == before, "nothing of ours is left under the home"
    again = subprocess.run([rj, "uninstall"], env=bare, capture_output=True, text=True)
    assert again.returncode == 0 and "nothing of reflect-jobs is installed" in again.stdout
