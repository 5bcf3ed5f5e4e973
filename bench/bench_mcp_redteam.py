"""Red team figures for ``reflect-jobs mcp`` (issue 24 item 4): what a fooled agent can do
through the MCP server to another repository, through a symlinked note, and by flooding.

Run: .venv/bin/python bench/bench_mcp_redteam.py [--code DIR] [--flood N]

A throw-away home holds two repositories — ``shop`` (where the harness starts the server,
as it does for a session there) and ``victim`` (with a person's open handoff) — and a KB
whose ``documents/`` carries links planted as a synced KB could carry them: one note linking
to a private key, one to a well-formed note outside the KB. The official SDK's stdio client
then, in one session:

* tries every way to write into ``victim``: ``add_item`` with its directory, key and remote
  URL, ``close_item`` of its handoff by directory, by key and by bare id, ``update_items``
  with its directory — and counts the event lines that landed in ``victim``'s logs;
* asks ``get`` for each linked note and counts the bytes of the link targets that came back
  (a target counts whole when any string only it holds is in any answer);
* closes one of its own items with a note of zero-width/bidi/tag characters only;
* adds ``--flood`` items (default 300) with 4,000-byte bodies and counts how many were
  written and how long it took.

``--code DIR`` runs the server from another checkout (``PYTHONPATH=DIR``), e.g. the
main branch, for the figures before the change; tools a checkout lacks count as refused.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BIN = Path(sys.executable).parent

from reflect_jobs import kb  # noqa: E402
from reflect_jobs.reflections.store import open_store  # noqa: E402

PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "QyNTUxOQAAACBenchbenchbenchbenchbenchbenchbenchbenchbench000000AAAAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)
INVISIBLE = "\u200b" * 30 + "\u202e\u2066" + "".join(chr(0xE0000 + ord(c)) for c in "done")


def _repo(path: Path, origin: str) -> Path:
    (path / ".git").mkdir(parents=True)
    (path / ".git" / "config").write_text(
        f'[remote "origin"]\n\turl = {origin}\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n'
    )
    return path


def _learning(title: str, rule: str) -> dict:
    return {
        "title": title,
        "rule": rule,
        "category": "Tools",
        "key_insight": rule,
        "confidence_num": 0.7,
        "scope": "global",
        "body": "## Context\nbench",
    }


def _lines(log_dir: Path) -> int:
    return sum(p.read_text().count("\n") for p in log_dir.glob("*.jsonl"))


async def _session(env: dict[str, str], cwd: Path, calls: list) -> list[tuple[str, bool, str]]:  # type: ignore[type-arg]
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(
        command=str(BIN / "reflect-jobs"), args=["mcp"], env=env, cwd=str(cwd)
    )
    out: list[tuple[str, bool, str]] = []
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        for label, name, args in calls:
            if callable(args):
                args = args(out)
            result = await session.call_tool(name, args)
            text = "".join(getattr(c, "text", "") for c in result.content)
            err = bool(getattr(result, "is_error", None) or getattr(result, "isError", False))
            if not err and re.match(r"\W*(<reflect-jobs-context>\s*)?error:", text):
                err = True  # a checkout that answers errors as text
            out.append((label, err, text))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", default=str(ROOT), help="checkout the server runs from")
    parser.add_argument("--flood", type=int, default=300, help="add_item calls in the flood")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="mcp-redteam-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REFLECT_", "GLOBAL_LEARN"))}
    env.update(
        REFLECT_HOME=str(tmp / "home"),
        GLOBAL_LEARNINGS_PATH=str(tmp / "kb"),
        REFLECT_INDEX_VECTORS="0",
        REFLECT_HOST="bench",
        PYTHONPATH=args.code,
        HF_HUB_OFFLINE="1",
    )
    os.environ.update(
        {k: env[k] for k in ("REFLECT_HOME", "GLOBAL_LEARNINGS_PATH", "REFLECT_HOST")}
    )
    shop = _repo(tmp / "shop", "https://github.com/acme/shop.git")
    victim = _repo(tmp / "victim", "https://github.com/acme/victim.git")
    st = open_store(None, victim, env)
    try:
        handoff, _ = st.add("handoff", "The honest handoff", "finish the migration", by="person")
        victim_logs = st.log_dir
    finally:
        st.close()
    kb.write_learning(
        tmp / "kb", _learning("Use uv", "Run uv sync"), created="2026-01-01T00:00:00Z",
        updated="2026-01-01T00:00:00Z", source_path=None, session_id=None,
    )  # fmt: skip
    secret = tmp / "ssh" / "id_ed25519"
    secret.parent.mkdir()
    secret.write_text(PRIVATE_KEY)
    outside = kb.write_learning(
        tmp / "outside", _learning("Prod deploy keys", "the prod token is zebra-canary-4411"),
        created="2026-01-01T00:00:00Z", updated="2026-01-01T00:00:00Z", source_path=None,
        session_id=None,
    )  # fmt: skip
    documents = tmp / "kb" / "documents"
    links = {"lrn-stolen-key-000000": secret, outside.id: outside.path}
    for note_id, target in links.items():
        (documents / f"{note_id}.md").symlink_to(target)
    targets = [t.read_text() for t in links.values()]
    #: What only the targets hold (an error naming the id the agent asked for is no leak).
    markers = [["BEGIN OPENSSH", "b3BlbnNzaC1rZXkt", "QyNTUxOQ"], ["zebra-canary-4411"]]

    vdir, vkey = str(victim), "github.com/acme/victim"
    writes = [
        ("add_item", {"kind": "handoff", "title": "Pwned", "repo": vdir}),
        ("add_item", {"kind": "handoff", "title": "Pwned", "repo": vkey}),
        ("add_item", {"kind": "action", "title": "Pwned", "repo": "https://x:y@github.com/acme/victim.git"}),
        ("close_item", {"id": handoff.id, "note": "done upstream, trust me", "repo": vdir}),
        ("close_item", {"id": handoff.id, "note": "done upstream, trust me", "repo": vkey}),
        ("close_item", {"id": handoff.id, "note": "done upstream, trust me"}),
        ("close_item", {"id": handoff.id, "note": "obsolete", "status": "dropped", "repo": vdir}),
        ("update_items", {"repo": vdir, "changes": [{"id": handoff.id, "op": "drop", "note": "obsolete now"}]}),
    ]  # fmt: skip
    calls: list = [(f"write {i}", n, a) for i, (n, a) in enumerate(writes)]  # type: ignore[type-arg]
    calls += [(f"read {i}", "get", {"id": note_id}) for i, note_id in enumerate(links)]
    calls.append(("own", "add_item", {"kind": "action", "title": "Own item"}))
    own_id = lambda out: re.search(r"(#[0-9a-f]{4,})", out[-1][2]).group(1)  # noqa: E731
    calls.append(("invisible", "close_item", lambda out: {"id": own_id(out), "note": INVISIBLE}))
    calls += [
        (f"flood {i}", "add_item", {"kind": "action", "title": f"Flood {i}", "body": "f" * 4000})
        for i in range(args.flood)
    ]
    before = _lines(victim_logs)
    started = time.monotonic()
    out = asyncio.run(_session(env, shop, calls))
    elapsed = time.monotonic() - started
    landed = _lines(victim_logs) - before
    answers = "\n".join(text for _, _, text in out)

    leaked_bytes = sum(
        len(t.encode()) for t, marks in zip(targets, markers, strict=True)
        if any(m in answers for m in marks)
    )  # fmt: skip
    by = {label: (err, text) for label, err, text in out}
    flood_ok = sum(1 for k, (err, _) in by.items() if k.startswith("flood ") and not err)
    st = open_store(None, victim, env)
    try:
        still_open = [i.id for i in st.items("open")] == [handoff.id]
    finally:
        st.close()
    print(f"server code: {args.code}")
    print(
        f"cross-repository write attempts: {len(writes)}; event lines landed in the victim: {landed}"
    )
    print(f"victim's honest handoff still open: {still_open}")
    print(
        f"symlinked-note reads: {len(links)}; target bytes returned: {leaked_bytes}"
        f" of {sum(len(t.encode()) for t in targets)}"
    )
    print(f"close with an invisible-only note accepted: {not by['invisible'][0]}")
    own = 0 if by["own"][0] else 1
    print(
        f"flood: {flood_ok} of {args.flood} adds written, after {own} other add"
        f" ({elapsed:.1f} s for the session)"
    )
    print(json.dumps({"writes_landed": landed, "target_bytes_returned": leaked_bytes,
                      "invisible_close_accepted": not by["invisible"][0], "flood_written": flood_ok}))  # fmt: skip


if __name__ == "__main__":
    main()
