"""Relevant recall (issue 25 items 1-2): the block's globals fit the repository's stack, and
per-prompt recall tells what the prompt needs, once per session, or nothing.

Everything here reads what the hook prints (the told block) from a real KB, a real reindex
and real directories; the worker cases talk to a real unix socket.
"""

from __future__ import annotations

import io
import json
import os
import socket
import sqlite3
import stat
import threading
import time

import pytest
from recall_support import add_note, learning, make_repo, reindex

from reflect_jobs.recall import hook, profile, relevance, store, tools
from reflect_jobs.recall.mcp_scope import ServerScope

KEY = "github.com/acme/engine"


def _rust_repo(tmp_path):
    repo = make_repo(tmp_path / "engine", "https://github.com/acme/engine.git")
    (repo / "Cargo.toml").write_text('[package]\nname = "engine"\n\n[dependencies]\ntokio = "1"\n')
    (repo / "src").mkdir()
    for i in range(5):
        (repo / "src" / f"m{i}.rs").write_text("fn main() {}\n")
    return repo


def _kb(env, tmp_path, monkeypatch):
    for key, value in env.items():
        if key.startswith(("REFLECT_", "GLOBAL_")):
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("REFLECT_RECALL_ON_PROMPT", "1")
    rust = add_note(
        env.kb,
        learning(
            "Never hold a std Mutex across an await",
            "Use tokio::sync::Mutex when the guard lives across .await points",
            scope="global",
            applies_to=["rust", "tokio"],
        ),
    )
    java = add_note(
        env.kb,
        learning(
            "Override hashCode with equals",
            "A class overriding equals must override hashCode",
            scope="global",
            applies_to=["java"],
        ),
    )
    add_note(
        env.kb,
        learning(
            "Pin GitHub Actions to a commit",
            "Reference third-party actions by full commit SHA",
            scope="global",
            applies_to=["github-actions"],
        ),
    )
    own = add_note(
        env.kb,
        learning(
            "Run the loom tests for the scheduler",
            "Run LOOM_MAX_PREEMPTIONS=2 cargo test --features loom in engine-sched",
            repo=KEY,
        ),
    )
    reindex(env.kb)
    return rust.id, java.id, own.id


def _hook(event: str, cwd, session: str, prompt: str = "") -> str:
    payload = {"hook_event_name": event, "cwd": str(cwd), "session_id": session}
    if prompt:
        payload["prompt"] = prompt
    out = io.StringIO()
    assert hook.handle(["claude"], json.dumps(payload), out)
    text = out.getvalue().strip()
    return json.loads(text)["hookSpecificOutput"]["additionalContext"] if text else ""


def _ids(block: str) -> list[str]:
    return [line[3 : line.index("]")] for line in block.splitlines() if line.startswith("- [")]


def test_a_rust_repository_is_told_the_rust_global_never_the_java_one(env, tmp_path, monkeypatch):
    rust, java, own = _kb(env, tmp_path, monkeypatch)
    repo = _rust_repo(tmp_path)
    block = _hook("SessionStart", repo / "src", "s1")
    lines = block.splitlines()
    assert "## General" in lines
    general = lines[lines.index("## General") + 1 :]
    assert [i for i in _ids("\n".join(general))] == [rust]
    assert java not in block and "hashCode" not in block
    assert "Pin GitHub Actions" not in block, "the repository has no workflows"
    assert own in _ids(block)


def test_no_general_section_rather_than_unrelated_rules(env, tmp_path, monkeypatch):
    _kb(env, tmp_path, monkeypatch)
    repo = make_repo(tmp_path / "site", "https://github.com/acme/site.git")
    (repo / "pyproject.toml").write_text('[project]\nname = "site"\ndependencies = ["flask"]\n')
    (repo / "app.py").write_text("")
    block = _hook("SessionStart", repo, "s2")
    assert block == "", "nothing fits a Python repository: no block at all"
    (repo / ".github" / "workflows").mkdir(parents=True)
    block = _hook("SessionStart", repo, "s3")
    assert "Pin GitHub Actions" in block and "hashCode" not in block and "Mutex" not in block


def test_per_prompt_tells_the_match_once_per_session_and_nothing_unrelated(
    env, tmp_path, monkeypatch
):
    rust, _, own = _kb(env, tmp_path, monkeypatch)
    repo = _rust_repo(tmp_path)
    prompt = "the scheduler hangs: we hold a std Mutex guard across an await in the worker"
    told = _hook("UserPromptSubmit", repo, "p1", prompt)
    assert _ids(told) and _ids(told)[0] == rust
    assert len(_ids(told)) <= 3 and "hashCode" not in told
    assert _hook("UserPromptSubmit", repo, "p1", prompt) == "", "never twice in a session"
    assert _ids(_hook("UserPromptSubmit", repo, "p2", prompt))[0] == rust, "another session"
    loom = _hook("UserPromptSubmit", repo, "p1", "run the loom tests for engine-sched")
    assert _ids(loom) == [own]
    for unrelated in (
        "write a haiku about autumn leaves",
        "what's the capital of Australia?",
        "please, thanks!",
        "",
    ):
        assert _hook("UserPromptSubmit", repo, "p3", unrelated) == ""
    # A learning the session-start block told is not told again by a prompt.
    start = _hook("SessionStart", repo, "p4")
    assert rust in _ids(start)
    assert rust not in _ids(_hook("UserPromptSubmit", repo, "p4", prompt))
    told_dir = tmp_path / "home" / "recall" / "told"
    for f in told_dir.iterdir():
        assert stat.S_IMODE(f.stat().st_mode) == 0o600
    assert stat.S_IMODE(told_dir.stat().st_mode) == 0o700


def test_bad_prompts_are_bounded_and_never_fail(env, tmp_path, monkeypatch):
    rust, _, _ = _kb(env, tmp_path, monkeypatch)
    repo = _rust_repo(tmp_path)
    huge = "lorem ipsum dolor " * 6000 + " std Mutex held across an await hangs"
    assert len(huge) > 100_000
    started = time.perf_counter()
    told = _hook("UserPromptSubmit", repo, "b1", huge)
    assert time.perf_counter() - started < 5.0
    assert rust in _ids(told), "the tail of a long paste is read"
    assert len(relevance.terms(huge)) <= relevance.MAX_TERMS
    assert _hook("UserPromptSubmit", repo, "b2", "写一首关于秋天的诗") == ""
    assert _hook("UserPromptSubmit", repo, "b3", 'quote " and ) ( * NEAR AND OR -') == ""
    payload = {"hook_event_name": "UserPromptSubmit", "cwd": str(repo), "prompt": ["not", "text"]}
    assert hook.handle(["claude"], json.dumps(payload), io.StringIO())


class _Socket:
    """A unix socket at the worker's path answering each request with ``reply`` (or never)."""

    def __init__(self, path, reply: bytes | None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.reply = reply
        self.requests: list[dict] = []
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            self.requests.append(json.loads(data))
            if self.reply is None:
                self.held.append(conn)  # never answers
            else:
                conn.sendall(self.reply)
                conn.close()

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


@pytest.mark.parametrize(
    "reply",
    [None, b"garbage\n", b'{"ok": true, "hits": [["x", "high"]]}\n', b"x" * 300_000],
    ids=["never", "garbage", "wrong-shape", "endless"],
)
def test_a_worker_that_answers_garbage_or_never_leaves_the_lexical_ranking(
    env, tmp_path, monkeypatch, reply
):
    rust, _, _ = _kb(env, tmp_path, monkeypatch)
    repo = _rust_repo(tmp_path)
    monkeypatch.setenv("REFLECT_RECALL_WORKER_MS", "80")
    server = _Socket(tmp_path / "home" / "run" / "model.sock", reply)
    try:
        started = time.perf_counter()
        told = _hook("UserPromptSubmit", repo, "w1", "std Mutex held across an await hangs")
        elapsed = time.perf_counter() - started
    finally:
        server.close()
    assert _ids(told)[0] == rust
    assert server.requests and server.requests[0]["op"] == "recall_similar"
    assert elapsed < 1.0, "the worker's budget bounds the wait"
    log = tmp_path / "home" / "hook-errors.log"
    logged = log.read_text() if log.exists() else ""
    assert ("lexical ranking used" in logged) == (reply is not None)


def test_a_worker_answer_adds_what_the_words_miss(env, tmp_path, monkeypatch):
    rust, _, _ = _kb(env, tmp_path, monkeypatch)
    repo = _rust_repo(tmp_path)
    prompt = "the runtime deadlocks sometimes when two tasks contend"
    assert _hook("UserPromptSubmit", repo, "v1", prompt) == "", "no shared words"
    reply = json.dumps({"ok": True, "hits": [[rust, 0.71]], "via": "worker"}).encode() + b"\n"
    monkeypatch.setenv("REFLECT_RECALL_WORKER_MS", "2000")
    server = _Socket(tmp_path / "home" / "run" / "model.sock", reply)
    try:
        told = _hook("UserPromptSubmit", repo, "v2", prompt)
    finally:
        server.close()
    assert _ids(told) == [rust]
    assert server.requests[0]["kb_path"] == str(env.kb)


def test_mcp_context_with_a_query_reaches_what_the_block_has_no_room_for(
    env, tmp_path, monkeypatch
):
    _kb(env, tmp_path, monkeypatch)
    repo = _rust_repo(tmp_path)
    for i in range(14):
        add_note(
            env.kb,
            learning(f"Engine lesson {i}", f"Rule number {i} about the engine", repo=KEY),
        )
    hidden = add_note(
        env.kb,
        learning(
            "Snapshot files are regenerated with insta",
            "Run cargo insta review after changing an error message",
            repo=KEY,
            confidence_num=0.1,
        ),
    )
    reindex(env.kb)
    assert hidden.id not in _ids(_hook("SessionStart", repo, "m1"))
    scope = ServerScope.here(str(repo))
    text = tools.context_tool(
        env.kb,
        str(repo),
        query="update the insta snapshot after changing an error message",
        scope=scope,
    )
    assert _ids(text)[0] == hidden.id
    none = tools.context_tool(env.kb, str(repo), query="a recipe for banana bread", scope=scope)
    assert _ids(none) == [] and "relevance floor" in none


def test_the_profile_reads_a_huge_lockfile_bounded_and_is_cached_privately(tmp_path):
    repo = make_repo(tmp_path / "web")
    (repo / "package.json").write_text('{"dependencies": {"react": "19"}}')
    lock = repo / "package-lock.json"
    with open(lock, "wb") as fh:
        fh.write(b'{"packages": {"node_modules/next": {}}}')
        fh.truncate(2 * 1024**3)  # a sparse 2 GB lockfile
    (repo / "a.tsx").write_text("")
    home = tmp_path / "home"
    started = time.perf_counter()
    prof = profile.profile(str(repo), str(home))
    assert time.perf_counter() - started < 5.0
    assert {"javascript", "typescript", "react", "nextjs", "node"} <= set(prof["terms"])
    cache = profile.cache_path(str(home), str(repo))
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(os.path.dirname(cache)).st_mode) == 0o700
    (repo / "Cargo.toml").write_text('[package]\nname = "x"\n')  # a manifest appears
    assert "rust" in profile.profile(str(repo), str(home))["terms"]
    os.unlink(cache)
    os.symlink("/etc/passwd", repo / "go.mod")  # a link is never read
    assert "go" in profile.read_profile(str(repo))["terms"]  # its presence, not its text


def test_an_old_store_without_applies_to_still_tells_and_is_rebuilt(env, tmp_path, monkeypatch):
    rust, java, _ = _kb(env, tmp_path, monkeypatch)
    path = store.store_path(env.kb)
    conn = sqlite3.connect(path)  # the store as schema 2 wrote it: no applies_to column
    with conn:
        conn.execute("DROP INDEX IF EXISTS notes_fit")
        conn.execute("ALTER TABLE notes DROP COLUMN applies_to")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema'")
    conn.close()
    repo = _rust_repo(tmp_path)
    told = _ids(_hook("SessionStart", repo, "o1"))
    assert rust not in told and java not in told, "what fits is unknown: none until refilled"
    assert told, "the repository's own learnings are still told"
    conn = store.open_for_write(path)  # the worker's next pass: column added, refill asked
    assert not store.is_populated(conn)
    conn.close()
    reindex(env.kb)
    assert rust in _ids(_hook("SessionStart", repo, "o2"))


def test_the_learning_a_prompt_is_about_comes_before_a_neighbour_sharing_its_words(
    env, tmp_path, monkeypatch
):
    """Both learnings hold every word of the prompt (the same evidence, the same floor);
    only the first is *about* it — its title is what the prompt names — so it alone is told
    (the neighbour falls below ``RELATIVE`` of it once the title share orders them)."""
    _kb(env, tmp_path, monkeypatch)
    about = add_note(
        env.kb,
        learning("Flaky e2e tests", "Poll with retry() instead of sleeping", repo=KEY),
    )
    brushes = add_note(
        env.kb,
        learning(
            "Run the standalone bundle check before a release",
            "The flaky e2e tests job runs it too",
            repo=KEY,
        ),
    )
    reindex(env.kb)
    assert relevance.title_share(["flaky", "e2e", "tests"], "Flaky e2e tests") == 1.0
    assert relevance.title_share(["flaky"], "Run the standalone bundle check") == 0.0
    told = _ids(_hook("UserPromptSubmit", _rust_repo(tmp_path), "t1", "the e2e tests are flaky"))
    assert told == [about.id] and brushes.id not in told


def test_a_manifests_versions_and_section_names_are_not_its_dependencies(tmp_path):
    """``tokio = "1"`` names tokio, not "1"; ``[workspace.dependencies]`` is no dependency
    called "dependencies"; ``[dependencies.serde]`` names serde, not its ``version`` key."""
    repo = make_repo(tmp_path / "ws", "https://github.com/acme/ws.git")
    (repo / "Cargo.toml").write_text(
        '[workspace]\nmembers = ["crates/*"]\n\n[workspace.dependencies]\ntokio = "1"\n'
        'clap = "4"\n\n[dependencies.serde]\nversion = "1.0"\n'
    )
    deps = profile.profile(str(repo), str(tmp_path / "home"))["dependencies"]
    assert {"tokio", "clap", "serde"} <= set(deps)
    assert not {"1", "4", "1.0", "dependencies", "version"} & set(deps)


def test_a_side_languages_rules_come_after_the_main_languages(env, tmp_path, monkeypatch):
    """A C++ project whose conversion scripts use numpy: its C++ rules are told first; the
    numpy rule still fits (a prompt about the scripts is told it) but no longer leads."""
    for key, value in env.items():
        if key.startswith(("REFLECT_", "GLOBAL_")):
            monkeypatch.setenv(key, value)
    numpy_rule = add_note(
        env.kb,
        learning(
            "Views share memory with the original array",
            "Copy a numpy slice before writing to it when the original must stay intact",
            scope="global",
            applies_to=["python", "numpy"],
            confidence_num=0.95,
        ),
    )
    cpp_rule = add_note(
        env.kb,
        learning(
            "Mark single-argument constructors explicit",
            "Declare one-argument C++ constructors explicit to stop silent conversions",
            scope="global",
            applies_to=["cpp"],
            confidence_num=0.6,
        ),
    )
    reindex(env.kb)
    repo = make_repo(tmp_path / "llm", "https://github.com/acme/llm.git")
    (repo / "CMakeLists.txt").write_text("project(llm CXX)\n")
    (repo / "requirements.txt").write_text("numpy\n")
    (repo / "src").mkdir()
    for i in range(12):
        (repo / "src" / f"k{i}.cpp").write_text("")
    (repo / "convert.py").write_text("")
    prof = profile.read_profile(str(repo))
    assert profile.side_languages(prof) == {"python"}
    general = _hook("SessionStart", repo, "s1").split("## General", 1)[1]
    assert _ids(general) == [cpp_rule.id, numpy_rule.id]  # fits, after the C++ rule
    # the same numpy rule leads in a Python project, where Python is the main language
    py = make_repo(tmp_path / "ds", "https://github.com/acme/ds.git")
    (py / "requirements.txt").write_text("numpy\n")
    for i in range(5):
        (py / f"m{i}.py").write_text("")
    assert profile.side_languages(profile.read_profile(str(py))) == frozenset()
    assert _ids(_hook("SessionStart", py, "s2")) == [numpy_rule.id]


def test_side_languages_count_a_family_together(tmp_path):
    ts = {"extensions": {".ts": 8, ".tsx": 4, ".js": 3, ".rs": 2}, "terms": ["typescript"]}
    assert profile.side_languages(ts) == {"rust"}  # JavaScript is TypeScript's family
    c = {"extensions": {".c": 6, ".cpp": 6, ".sh": 1}, "terms": ["c", "cpp", "go"]}
    assert profile.side_languages(c) == {"shell", "go"}  # named by a manifest, no file
    assert profile.side_languages({"extensions": {}, "terms": ["python"]}) == frozenset()
