"""``reflections`` end to end: real subprocesses, two hosts over one memory home, real files."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from support import BIN, Env

from reflect_jobs.reflections.events import format_ts

ITEM_KEYS = {"id", "kind", "title", "body", "status", "notes", "by", "created_at", "updated_at"}
GH_TOKEN = "ghp_" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4J3i2"


def make_repo(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / ".git" / "config").write_text('[remote "origin"]\n\turl = git@github.com:o/demo.git\n')
    (root / "src").mkdir()
    return root


def run(env: dict, cwd: Path, *args: str, code: int = 0, exe: str = "reflections") -> str:
    proc = subprocess.run(
        [str(BIN / exe), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == code, f"{args}: {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout if code == 0 else proc.stderr


def js(env: dict, cwd: Path, *args: str):  # type: ignore[no-untyped-def]
    return json.loads(run(env, cwd, *args, "--json"))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "demo")


@pytest.fixture
def hosts(env: Env, tmp_path: Path) -> tuple[dict, dict]:
    """Two machines: their own REFLECT_HOME (index) and host name, one synced memory home."""
    alpha = {**env, "REFLECT_HOST": "alpha"}
    beta = {**env, "REFLECT_HOST": "beta", "REFLECT_HOME": str(tmp_path / "beta-home")}
    return alpha, beta


def log_dir(env: dict) -> Path:
    homes = list((Path(env["GLOBAL_LEARNINGS_PATH"]) / "repos").iterdir())
    assert len(homes) == 1
    return homes[0] / "reflections"


def test_two_hosts_one_memory_home_fold_latest_event_wins(repo: Path, hosts) -> None:  # type: ignore[no-untyped-def]
    alpha, beta = hosts
    item_id = run(alpha, repo / "src", "add", "--kind", "action", "--title", "Wire X").strip()
    assert item_id.startswith("#") and len(item_id) >= 5
    [seen] = js(beta, repo, "list")
    assert (seen["id"], seen["title"], seen["status"]) == (item_id, "Wire X", "open")
    alpha_log = (log_dir(alpha) / "alpha.jsonl").read_bytes()
    run(beta, repo, "edit", item_id.lstrip("#"), "--title", "Wire X into the importer")
    run(beta, repo, "done", item_id, "--note", "shipped in abc123")
    assert (log_dir(alpha) / "alpha.jsonl").read_bytes() == alpha_log  # beta wrote only its own
    assert sorted(p.name for p in log_dir(alpha).iterdir()) == ["alpha.jsonl", "beta.jsonl"]
    for machine in (alpha, beta):
        assert js(machine, repo, "list") == []
        [item] = js(machine, repo, "list", "--status", "done")
        assert item["title"] == "Wire X into the importer"
        assert [n["text"] for n in item["notes"]] == ["shipped in abc123"]
    run(alpha, repo, "reopen", item_id, "--note", "regressed")
    assert [i["status"] for i in js(beta, repo, "list")] == ["open"]


def test_json_shape_ids_with_or_without_hash_and_exit_codes(repo: Path, env: Env) -> None:
    item = js(env, repo, "add", "--kind", "question", "--title", "Old flag?", "--body", "b")
    assert item.keys() >= ITEM_KEYS and item["new"] is True and item["by"] == "person"
    again = js(env, repo, "add", "--kind", "question", "--title", "old  FLAG?")
    assert (again["id"], again["new"]) == (item["id"], False)  # re-adding is the same item
    assert js(env, repo, "done", item["id"].lstrip("#"), "--note", "gone")["status"] == "done"
    assert "already done" in run(env, repo, "done", item["id"], "--note", "x", code=1)
    assert "not an item id" in run(env, repo, "drop", "zz", "--note", "x", code=2)
    assert "no item #ffff" in run(env, repo, "drop", "ffff", "--note", "x", code=1)
    assert "not inside a git repository" in run(env, repo.parent, "list", code=2)
    assert "kind" in run(env, repo, "add", "--kind", "chore", "--title", "t", code=2)
    via_jobs = json.loads(
        run(env, repo, "items", "list", "--status", "all", "--json", exe="reflect-jobs")
    )
    assert [i["id"] for i in via_jobs] == [item["id"]]
    # one identity: the key people see is what --repo takes; the home's directory name too
    name = log_dir(env).parent.name
    for key in ("github.com/o/demo", name):
        listed = js(env, repo.parent, "list", "--status", "done", "--repo", key)
        assert [i["id"] for i in listed] == [item["id"]]
    [listed] = js(env, repo.parent, "list", "--all", "--status", "all")
    assert listed["repo"] == "github.com/o/demo"
    assert js(env, repo, "context")["repo"] == "github.com/o/demo"


def test_secrets_are_redacted_before_the_line_is_written(repo: Path, env: Env) -> None:
    item = js(
        env,
        repo,
        "add",
        "--kind",
        "action",
        "--title",
        "rotate key",
        "--body",
        f"the old one was {GH_TOKEN}",
    )
    run(env, repo, "done", item["id"], "--note", f"password=s3cretpassw0rd and {GH_TOKEN}")
    text = "".join(p.read_text() for p in log_dir(env).iterdir())
    assert GH_TOKEN not in text and "s3cretpassw0rd" not in text
    assert text.count("[REDACTED:github_token]") == 2
    [shown] = js(env, repo, "list", "--status", "done")
    assert "[REDACTED:github_token]" in shown["body"] and GH_TOKEN not in json.dumps(shown)


def test_an_untouched_open_item_reads_stale_until_it_is_edited(repo: Path, env: Env) -> None:
    fresh = run(env, repo, "add", "--kind", "action", "--title", "Fresh").strip()
    # another machine's log, synced: the reflector opened an item ten days ago
    old = format_ts(datetime.now(UTC) - timedelta(days=10))
    line = {
        "v": 1,
        "eid": "00000000000000aa",
        "ts": old,
        "host": "gamma",
        "op": "add",
        "uid": "ccccdddd00000000",
        "by": "reflector",
        "kind": "action",
        "title": "Old one",
    }
    (log_dir(env) / "gamma.jsonl").write_text(json.dumps(line) + "\nnot an event\n")
    proc = subprocess.run(
        [str(BIN / "reflections"), "list", "--json"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and [i["id"] for i in json.loads(proc.stdout)] == [fresh]
    assert "skipped 1 invalid line(s) in" in proc.stderr and "gamma.jsonl" in proc.stderr
    assert [i["title"] for i in js(env, repo, "list", "--status", "stale")] == ["Old one"]
    assert "Old one" not in run(env, repo, "context")
    run(env, repo, "edit", "#cccc", "--body", "still needed")
    assert sorted(i["title"] for i in js(env, repo, "list")) == ["Fresh", "Old one"]


def test_context_lists_handoffs_first_then_newest_within_the_budget(repo: Path, env: Env) -> None:
    ids = [
        run(env, repo, "add", "--kind", k, "--title", t).strip()
        for k, t in [
            ("action", "first"),
            ("handoff", "pick up"),
            ("question", "third"),
            ("learning", "a note"),
            ("summary", "session so far"),
        ]
    ]
    out = js(env, repo, "context")
    assert [i["id"] for i in out["items"]] == [ids[1], ids[2], ids[0]] and out["open"] == 3
    assert out["text"].splitlines()[1].startswith(f"- {ids[1]} [handoff] pick up")
    for n in range(4):
        run(env, repo, "add", "--kind", "action", "--title", f"filler {n} " + "x" * 90)
    small = js(env, repo, "context", "--budget", "400")
    assert len(small["text"]) <= 400 and small["open"] == 7 and len(small["items"]) < 7
    assert small["text"].endswith("more: `reflections list`")


def test_search_spans_items_and_the_repository_learnings(repo: Path, env: Env) -> None:
    run(env, repo, "add", "--kind", "gotcha", "--title", "sqlite wal needs shm", "--body", "b")
    run(env, repo, "add", "--kind", "action", "--title", "unrelated")
    out = js(env, repo, "search", "sqlite wal")
    assert [i["title"] for i in out["items"]] == ["sqlite wal needs shm"] and out["learnings"] == []
    from reflect_jobs.index.lexical import LexicalIndex

    with LexicalIndex(Path(env["GLOBAL_LEARNINGS_PATH"]) / "index" / "lexical.db") as lex:
        lex.upsert(
            "l-1",
            title="SQLite WAL mode",
            body="checkpoints",
            path="documents/l-1.md",
            content_hash="h",
        )
    out = js(env, repo, "search", "sqlite wal")
    assert [h["id"] for h in out["learnings"]] == ["l-1"] and len(out["items"]) == 1


def test_concurrent_writers_on_one_host_lose_no_line(repo: Path, env: Env) -> None:
    procs = [
        subprocess.Popen(
            [
                str(BIN / "reflections"),
                "add",
                "--kind",
                "action",
                "--title",
                f"parallel {n}",
                "--body",
                "x" * 5000,
            ],
            cwd=repo,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(6)
    ]
    ids = []
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        ids.append(out.strip())
    lines = "".join(p.read_text() for p in log_dir(env).iterdir()).splitlines()
    assert len(lines) == 6 and all(json.loads(line)["op"] == "add" for line in lines)
    listed = js(env, repo, "list")
    assert sorted(i["title"] for i in listed) == [f"parallel {n}" for n in range(6)]
    assert {i["id"] for i in listed} == set(ids)
