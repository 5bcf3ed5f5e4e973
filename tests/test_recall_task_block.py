"""SessionStart after a compaction or a resume: the learnings the task needs come first.

A real ``reflect-jobs-hook`` process reads the tail of the payload's transcript (issue 25,
item 2); a fresh start, and every transcript that cannot be read safely, keep the block
ranked by strength.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from recall_support import add_note, learning, make_repo, reindex
from support import BIN

HOOK = str(BIN / "reflect-jobs-hook")
KEY = "github.com/acme/shop"
X_TITLE = "Regenerate protobuf stubs with buf generate"
FILLER = [
    ("Run pnpm -w install at the workspace root", "Install from the root only"),
    ("Seed the database before the e2e suite", "Run make seed first"),
    ("Keep feature flags in flags.yaml", "Never hardcode a flag"),
    ("Use the shared logger module", "Import log from lib/log"),
    ("Bump the schema version on every migration", "Edit schema_version"),
    ("Storybook stories live next to components", "One story per component"),
    ("Translations go through the i18n extractor", "Run pnpm i18n:extract"),
    ("Payments sandbox keys are in vault", "Never commit a key"),
    ("The CDN purges on deploy", "Do not purge by hand"),
    ("Admin routes need the staff guard", "Wrap them in requireStaff"),
    ("Images are resized by the worker", "Upload originals only"),
    ("Webhooks are verified with the signing secret", "Check the signature header"),
]


def _setup(env, tmp_path):
    repo = make_repo(tmp_path / "shop", "https://github.com/acme/shop.git")
    for i, (title, rule) in enumerate(FILLER):
        add_note(env.kb, learning(title, rule, repo=KEY, confidence_num=0.95 - i * 0.01))
    # The weakest learning of the repository: at a fresh start it is not among the ten told.
    add_note(
        env.kb,
        learning(
            X_TITLE,
            "After editing any .proto file run buf generate; never edit the stubs by hand",
            repo=KEY,
            confidence_num=0.3,
        ),
    )
    reindex(env.kb)
    return repo


def _record(role, content, **extra):
    return json.dumps({"type": role, "message": {"role": role, "content": content}, **extra})


def _transcript(path, last_prompt):
    lines = [
        _record("user", "set up the storybook stories for the cart"),
        _record("assistant", [{"type": "text", "text": "Done."}]),
        _record("user", last_prompt),
        _record("assistant", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]),
        # tool output and our own injected block are not what the person asked
        _record(
            "user",
            [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": "webhooks signing secret signature header verified",
                }
            ],
        ),
        _record(
            "user",
            "<reflect-jobs-context>\n- [x] Webhooks are verified with the signing secret\n"
            "</reflect-jobs-context>",
            isMeta=True,
        ),
        _record(
            "user",
            "This session is being continued from a previous conversation. "
            "Summary: webhooks signature",
            isCompactSummary=True,
        ),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _block(env, cwd, source, transcript=None, sid="s"):
    payload = {
        "session_id": sid,
        "hook_event_name": "SessionStart",
        "cwd": str(cwd),
        "source": source,
    }
    if transcript is not None:
        payload["transcript_path"] = str(transcript)
    proc = subprocess.run(
        [HOOK, "claude"],
        input=json.dumps(payload).encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]


def _learning_lines(ctx):
    return [x for x in ctx.splitlines() if x.startswith("- [")]


@pytest.mark.parametrize("source", ["compact", "resume"])
def test_a_compacted_session_is_told_the_learning_its_task_needs_first(env, tmp_path, source):
    repo = _setup(env, tmp_path)
    transcript = _transcript(
        tmp_path / "t.jsonl",
        "the generated protobuf stubs are stale after my .proto edit, fix them",
    )
    fresh = _block(env, repo, "startup", transcript, sid="a")
    assert X_TITLE not in fresh  # the weakest of 13: not told at a fresh start
    ctx = _block(env, repo, source, transcript, sid="b")
    lines = _learning_lines(ctx)
    assert X_TITLE in lines[0], ctx
    # the rest still follows by strength, and the block is as long as before
    assert len(lines) == len(_learning_lines(fresh))
    assert FILLER[0][0] in "\n".join(lines[1:3])
    # what the tool printed and our own block named is no query: webhooks stay where they were
    assert not any("Webhooks" in x for x in lines[:3])


OLD = "2025-01-02T03:04:05Z"  # far more than 180 days before any run: dormant
DORMANT_MARK = "(dormant: not confirmed for 180+ days; a confirmation revives it)"


def test_a_dormant_learning_the_task_needs_is_told_marked_after_a_compaction(env, tmp_path):
    """The order by strength leaves a dormant learning out; the task asking for it brings
    it back, marked (as per-prompt recall, which tells it before the compaction, does)."""
    repo = make_repo(tmp_path / "shop", "https://github.com/acme/shop.git")
    for i, (title, rule) in enumerate(FILLER):
        add_note(env.kb, learning(title, rule, repo=KEY, confidence_num=0.95 - i * 0.01))
    rule = "After editing any .proto file run buf generate; never edit the stubs by hand"
    add_note(env.kb, learning(X_TITLE, rule, repo=KEY, confidence_num=0.9), updated=OLD)
    reindex(env.kb)
    prompt = "the generated protobuf stubs are stale after my .proto edit, fix them"
    transcript = _transcript(tmp_path / "t.jsonl", prompt)

    fresh = _block(env, repo, "startup", transcript, sid="a")
    assert X_TITLE not in fresh, "dormant: not told by strength"
    assert "+2 more" in fresh  # 12 awake ones qualify, 10 told; the dormant one is not counted

    ctx = _block(env, repo, "compact", transcript, sid="b")
    lines = _learning_lines(ctx)
    assert X_TITLE in lines[0] and rule in lines[0] and lines[0].endswith(DORMANT_MARK), ctx
    assert not any(DORMANT_MARK in x for x in lines[1:]), "only the dormant one is marked"
    assert len(lines) == len(_learning_lines(fresh))
    assert "+3 more" in ctx  # 13 qualify now (the dormant one the task asked for), 10 told

    _on_branch(repo, "ref: refs/heads/fix/stale-protobuf-stubs\n")  # a fresh start names it
    assert _learning_lines(_block(env, repo, "startup", sid="c"))[0] == lines[0]

    asked = subprocess.run(  # per-prompt recall tells it with the same mark
        [HOOK, "claude"],
        input=json.dumps(
            {
                "session_id": "d",
                "hook_event_name": "UserPromptSubmit",
                "cwd": str(repo),
                "prompt": prompt,
            }
        ).encode(),
        env={**env, "REFLECT_RECALL_ON_PROMPT": "1"},
        capture_output=True,
        timeout=30,
    )
    told = json.loads(asked.stdout)["hookSpecificOutput"]["additionalContext"]
    (line,) = [x for x in _learning_lines(told) if X_TITLE in x]
    assert line.endswith(DORMANT_MARK), told


def test_a_fresh_start_is_unchanged_by_the_transcript(env, tmp_path):
    repo = _setup(env, tmp_path)
    transcript = _transcript(tmp_path / "t.jsonl", "regenerate the protobuf stubs with buf")
    without = _block(env, repo, "startup", sid="a")
    for source in ("startup", "clear", None):
        assert _block(env, repo, source, transcript, sid=f"b{source}") == without


def _bad_paths(tmp_path):
    good = _transcript(tmp_path / "good.jsonl", "regenerate the protobuf stubs with buf")
    link = tmp_path / "link.jsonl"
    link.symlink_to(good)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    huge = tmp_path / "huge.jsonl"
    with open(huge, "wb") as fh:  # 3 GB of nothing, then a prompt line longer than any kept
        fh.truncate(3 * 1024**3)
        fh.seek(0, 2)
        fh.write(_record("user", "protobuf stubs buf " * 20000).encode())
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_bytes(os.urandom(300_000) + b'\n{"type": "user", "message": 7}\n')
    return {
        "symlink": link,
        "fifo": fifo,
        "huge": huge,
        "garbage": garbage,
        "directory": tmp_path,
        "missing": tmp_path / "gone.jsonl",
    }


def test_an_unreadable_transcript_keeps_todays_block(env, tmp_path):
    repo = _setup(env, tmp_path)
    today = _block(env, repo, "startup", sid="a")
    for name, path in _bad_paths(tmp_path).items():
        # a FIFO with no writer would block an open() for ever: subprocess's timeout guards
        assert _block(env, repo, "compact", path, sid=name) == today, name
    log = env.home / "hook-errors.log"
    assert not log.exists() or "Traceback" not in log.read_text()


def _on_branch(repo, head: str) -> None:
    (repo / ".git" / "HEAD").write_text(head)


def test_a_fresh_start_on_a_task_branch_is_told_what_the_branch_names_first(env, tmp_path):
    repo = _setup(env, tmp_path)
    today = _block(env, repo, "startup", sid="a")
    _on_branch(repo, "ref: refs/heads/fix/stale-protobuf-stubs\n")
    for source in ("startup", "clear", None):
        ctx = _block(env, repo, source, sid=f"b{source}")
        lines = _learning_lines(ctx)
        assert X_TITLE in lines[0], ctx  # the weakest of 13, named by the branch
        assert len(lines) == len(_learning_lines(today))
        assert FILLER[0][0] in "\n".join(lines[1:3])  # the rest by strength, as before
    # after a compaction the session's own prompts say the task, not the branch
    transcript = _transcript(tmp_path / "t.jsonl", "put the storybook stories next to components")
    lines = _learning_lines(_block(env, repo, "compact", transcript, sid="c"))
    assert "Storybook" in lines[0] and X_TITLE not in lines[0]


@pytest.mark.parametrize(
    "head",
    [
        "ref: refs/heads/main\n",
        "ref: refs/heads/dev\n",
        "ref: refs/heads/release/main\n",
        "ref: refs/heads/alice/wip\n",  # words no learning holds
        "ref: refs/heads/gh-4312\n",
        "3f2a9c0d1e4b5a6978c0d1e2f3a4b5c6d7e8f901\n",  # detached
        "",
    ],
)
def test_a_branch_that_names_no_task_keeps_todays_block(env, tmp_path, head):
    repo = _setup(env, tmp_path)
    today = _block(env, repo, "startup", sid="a")
    _on_branch(repo, head)
    assert _block(env, repo, "startup", sid="b") == today


def test_a_linked_worktree_is_ranked_by_its_own_branch(env, tmp_path):
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    main = _setup(env, tmp_path)
    (main / ".git").rename(tmp_path / "gitmeta")  # rebuilt by git below
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main", str(main)], check=True)
    subprocess.run(
        [*git, "-C", str(main), "remote", "add", "origin", "https://github.com/acme/shop.git"],
        check=True,
    )
    subprocess.run([*git, "-C", str(main), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    wt = tmp_path / "wt"
    subprocess.run(
        [*git, "-C", str(main), "worktree", "add", "-q", "-b", "proto-stubs-regen", str(wt)],
        check=True,
    )
    assert X_TITLE not in _block(env, main, "startup", sid="a")  # main: by strength
    assert X_TITLE in _learning_lines(_block(env, wt, "startup", sid="b"))[0]


def test_a_fifo_in_the_git_metadata_cannot_hang_the_hook(env, tmp_path):
    repo = _setup(env, tmp_path)
    today = _block(env, repo, "startup", sid="a")
    os.mkfifo(repo / ".git" / "HEAD")
    assert _block(env, repo, "startup", sid="b") == today  # subprocess's timeout guards
    (repo / ".git" / "config").unlink()
    os.mkfifo(repo / ".git" / "config")
    payload = {"session_id": "c", "hook_event_name": "SessionStart", "cwd": str(repo)}
    proc = subprocess.run(
        [HOOK, "claude"],
        input=json.dumps(payload).encode(),
        env=dict(env),
        capture_output=True,
        timeout=30,
    )  # no origin readable: no repository's learnings, and no hang
    assert proc.returncode == 0, proc.stderr
    assert X_TITLE not in proc.stdout.decode()


def test_the_context_preview_ranks_by_the_branch_as_the_hook_does(env, tmp_path):
    repo = _setup(env, tmp_path)
    _on_branch(repo, "ref: refs/heads/fix/stale-protobuf-stubs\n")
    preview, why = _preview(env, repo)
    assert X_TITLE in preview[0]
    assert preview == _learning_lines(_block(env, repo, "startup", sid="a"))
    assert "ranked for the branch's words: fix stale protobuf stubs" in why


def _preview(env, repo):
    """`reflect-jobs context` for the checkout: its learning lines and what it said why."""
    proc = subprocess.run(
        [str(BIN / "reflect-jobs"), "context", "--cwd", str(repo)],
        env=dict(env),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return _learning_lines(proc.stdout.decode()), proc.stderr.decode()


def _handoff(env, repo, title, body, by):
    from reflect_jobs.reflections.store import open_store

    store = open_store(str(repo), repo, dict(env))
    try:
        item, _ = store.add("handoff", title, body, by=by)
        return item.id, store
    except BaseException:
        store.close()
        raise


def test_a_fresh_start_is_ranked_by_the_handoff_a_person_or_skill_left(env, tmp_path):
    repo = _setup(env, tmp_path)
    today = _block(env, repo, "startup", sid="a")
    assert X_TITLE not in today  # on main with no handoff: by strength
    # A model's handoff is written from what its session read: it does not steer.
    _, store = _handoff(
        env, repo, "Continue with the protobuf stubs", "regenerate the stale stubs", "reflector"
    )
    store.close()
    assert _learning_lines(_block(env, repo, "startup", sid="b")) == _learning_lines(today)
    handoff, store = _handoff(
        env,
        repo,
        "Pick up the protobuf stubs",
        "I edited orders.proto; the generated stubs are stale",
        "skill",
    )
    try:
        ctx = _block(env, repo, "startup", sid="c")
        lines = _learning_lines(ctx)
        assert X_TITLE in lines[0], ctx  # the weakest of 13, first: the next session's task
        assert len(lines) == len(_learning_lines(today))
        assert f"- {handoff} [handoff] Pick up the protobuf stubs" in ctx
        # `reflect-jobs context` previews the same block and says why
        preview, why = _preview(env, repo)
        assert preview == lines
        assert f"ranked for handoff {handoff}: Pick up the protobuf stubs" in why
        # A task branch names this session's task before an earlier session's handoff.
        _on_branch(repo, "ref: refs/heads/fix/webhook-signature-header\n")
        assert "Webhooks" in _learning_lines(_block(env, repo, "startup", sid="d"))[0]
        _on_branch(repo, "ref: refs/heads/main\n")
        # Closed, it no longer names the task.
        store.change("done", handoff, note="stubs regenerated")
    finally:
        store.close()
    assert _learning_lines(_block(env, repo, "startup", sid="e")) == _learning_lines(today)
