"""Red team (issue 24 item 4): what a synced KB or memory home holds is read without
following links, inside its root, bounded — and a linked ``documents/`` or memory home
is refused with one line, never written through or ``chmod``-ed.

The attacks: ``documents/lrn-x.md`` → ``~/.ssh/id_ed25519`` (``get`` returned the key);
``documents/`` → another directory (written through, its mode changed to 0700); a memory
home, its ``reflections/`` or a host log that is a link (read from, appended to).
"""

from __future__ import annotations

import errno
import json
import os
import stat
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from recall_support import add_note, learning, make_repo, reindex

from reflect_jobs import fsio, kb, perms
from reflect_jobs.invisible import strip_invisible, visible_count
from reflect_jobs.recall import items
from reflect_jobs.recall.session_start import session_context
from reflect_jobs.reflections.events import append_event, make_event
from reflect_jobs.reflections.logscan import scan_logs
from reflect_jobs.reflections.store import open_store
from reflect_jobs.repo import RepoError, repo_for
from reflect_jobs.repo_home import read_key_file

SECRET = "-----BEGIN OPENSSH PRIVATE KEY-----\nAAAAredteam\n-----END OPENSSH PRIVATE KEY-----\n"


def _cli_env(monkeypatch: pytest.MonkeyPatch, env) -> None:  # type: ignore[no-untyped-def]
    """The environment an in-process CLI call reads (and the defaults it sets, restored)."""
    for key, value in (
        ("GLOBAL_LEARNINGS_PATH", str(env.kb)),
        ("REFLECT_HOME", str(env.home)),
        ("REFLECT_INDEX_VECTORS", "0"),
        ("HF_HUB_DISABLE_PROGRESS_BARS", "1"),
        ("TRANSFORMERS_VERBOSITY", "error"),
        ("TQDM_DISABLE", "1"),
    ):
        monkeypatch.setenv(key, value)


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "ssh" / "id_ed25519"
    path.parent.mkdir()
    path.write_text(SECRET)
    path.chmod(0o600)
    return path


# -- fsio: the one owner of safe reads ------------------------------------------------


def test_open_inside_refuses_a_link_in_any_component_and_dot_dot(tmp_path, secret):
    base = tmp_path / "kb"
    (base / "documents").mkdir(parents=True)
    (base / "documents" / "ok.md").write_text("fine")
    (base / "documents" / "x.md").symlink_to(secret)
    (base / "linked").symlink_to(secret.parent, target_is_directory=True)
    assert fsio.read_inside(base, "documents", "ok.md", max_bytes=100) == b"fine"
    for parts in (
        ("documents", "x.md"),
        ("linked", "id_ed25519"),
        ("documents/../../ssh/id_ed25519",),
    ):
        with pytest.raises(fsio.UnsafePath) as caught:
            fsio.read_inside(base, *parts, max_bytes=10_000)
        assert "\n" not in str(caught.value) and "BEGIN" not in str(caught.value)
    with pytest.raises(fsio.UnsafePath, match="symbolic link"):
        fsio.read_regular(base / "documents" / "x.md", max_bytes=10_000)
    assert fsio.read_regular(secret, max_bytes=10_000, follow=True) == SECRET.encode()


def test_reads_are_bounded_and_a_fifo_never_blocks(tmp_path):
    (tmp_path / "big.md").write_bytes(b"x" * 5000)
    with pytest.raises(fsio.TooLarge, match="5,000 bytes"):
        fsio.read_inside(tmp_path, "big.md", max_bytes=4096)
    os.mkfifo(tmp_path / "pipe.md")
    done: list[BaseException] = []

    def read() -> None:
        try:
            fsio.read_inside(tmp_path, "pipe.md", max_bytes=10)
        except BaseException as exc:  # noqa: BLE001 - recorded for the assertion
            done.append(exc)

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(5)
    assert done and isinstance(done[0], fsio.NotRegularFile)


# -- the KB: notes, sidecars, documents/ ----------------------------------------------


def test_a_linked_note_or_sidecar_is_never_parsed(tmp_path, secret):
    link = tmp_path / "lrn-x.md"
    link.symlink_to(secret)
    with pytest.raises(kb.NoteError, match="symbolic link") as caught:
        kb.parse_note(link)
    assert "BEGIN" not in str(caught.value)
    with pytest.raises(kb.NoteError, match="symbolic link"):
        kb.load_sidecar(link)


def test_reindex_skips_a_linked_note_with_a_logged_line(env, monkeypatch, tmp_path, secret):
    note = add_note(env.kb, learning("Use uv", "Run uv sync", scope="global"))
    (env.kb / "documents" / "lrn-stolen-000000.md").symlink_to(secret)
    _cli_env(monkeypatch, env)
    from reflect_jobs.cli import main

    result = CliRunner().invoke(main, ["reindex"])
    assert result.exit_code == 0, result.output
    assert "warning: lrn-stolen-000000.md: a symbolic link, skipped" in result.stderr
    assert "BEGIN" not in result.output
    stats = reindex(env.kb, force=True)
    assert stats.inserted == 1 and stats.unreadable == 1
    assert [p.name for p in kb.iter_notes(env.kb)] == [note.path.name]
    found = CliRunner().invoke(main, ["search", "--mode", "lexical", "--json", "OPENSSH"])
    assert found.exit_code == 0 and json.loads(found.stdout)["results"] == []


def test_a_linked_documents_dir_is_refused_never_written_through_or_chmodded(env, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "theirs.txt").write_text("keep")
    elsewhere.chmod(0o755)
    (elsewhere / "theirs.txt").chmod(0o644)
    env.kb.mkdir()
    (env.kb / "documents").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(fsio.UnsafePath) as caught:
        add_note(env.kb, learning("Use uv", "Run uv sync", scope="global"))
    line = str(caught.value)
    assert "\n" not in line and "documents is a symbolic link: refused" in line
    assert "GLOBAL_LEARNINGS_PATH" in line
    with pytest.raises(fsio.UnsafePath):
        reindex(env.kb)
    perms.fix_tree(env.kb)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["theirs.txt"], "nothing written"
    assert stat.S_IMODE(elsewhere.stat().st_mode) == 0o755, "its mode unchanged"
    assert stat.S_IMODE((elsewhere / "theirs.txt").stat().st_mode) == 0o644


def test_the_cli_says_one_line_for_a_linked_documents_dir(env, monkeypatch, tmp_path):
    (tmp_path / "elsewhere").mkdir()
    env.kb.mkdir()
    (env.kb / "documents").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    _cli_env(monkeypatch, env)
    from reflect_jobs.cli import main

    result = CliRunner().invoke(main, ["reindex"])
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert "documents is a symbolic link: refused" in line and "Traceback" not in result.output


# -- memory homes: the home, reflections/, the logs, the label -----------------------


def test_a_linked_memory_home_is_refused_unless_mapped(env, tmp_path, monkeypatch):
    repo = make_repo(tmp_path / "shop", "https://github.com/acme/shop.git")
    name = repo_for(str(repo)).name
    real = tmp_path / "real-home"
    (real / "reflections").mkdir(parents=True)
    (env.kb / "repos").mkdir(parents=True)
    (env.kb / "repos" / name).symlink_to(real, target_is_directory=True)
    with pytest.raises(RepoError, match="is a symbolic link: refused") as caught:
        open_store(None, repo, dict(env))
    assert "REFLECT_MEMORY_HOMES" in str(caught.value)
    with pytest.raises(RepoError):
        items.open_items(str(repo), dict(env))
    # the session start still tells the learnings and logs the refusal
    monkeypatch.setenv("REFLECT_HOME", str(env.home))
    monkeypatch.setenv("GLOBAL_LEARNINGS_PATH", str(env.kb))
    add_note(env.kb, learning("Use uv", "Run uv sync", scope="global"))
    reindex(env.kb)
    assert "Use uv" in session_context(str(repo), max_chars=2000, kb_root=str(env.kb))
    assert "symbolic link" in (env.home / "hook-errors.log").read_text()
    # mapped explicitly: the person's word, followed
    mapping = tmp_path / "homes.conf"
    mapping.write_text(f"github.com/acme/shop = {env.kb / 'repos' / name}\n")
    mapped = dict(env, REFLECT_MEMORY_HOMES=str(mapping))
    st = open_store(None, repo, mapped)
    try:
        st.add("action", "Mapped home works")
    finally:
        st.close()
    assert list((real / "reflections").glob("*.jsonl"))


def test_a_linked_reflections_dir_log_or_label_is_never_followed(env, tmp_path):
    repo = make_repo(tmp_path / "shop", "https://github.com/acme/shop.git")
    st = open_store(None, repo, dict(env))
    try:
        st.add("action", "Honest item")
        log_dir, log = st.log_dir, st.log
        home = Path(st.repo.home)
    finally:
        st.close()
    # a "log" that links to another file holding events is not listed, so never read
    forged = tmp_path / "forged.jsonl"
    event = make_event("add", "a" * 16, host="mallory", by="person", kind="handoff", title="Forged")
    forged.write_text(json.dumps(event) + "\n")
    (log_dir / "mallory.jsonl").symlink_to(forged)
    assert set(scan_logs(log_dir)) == {str(log)}
    st = open_store(None, repo, dict(env))
    try:
        assert [i.title for i in st.items("all")] == ["Honest item"]
    finally:
        st.close()
    # this host's log swapped for a link to ~/.bashrc: the append is refused, the target kept
    bashrc = tmp_path / "bashrc"
    bashrc.write_text("# mine\n")
    log.unlink()
    log.symlink_to(bashrc)
    with pytest.raises(OSError) as caught:
        append_event(
            log, make_event("add", "b" * 16, host="here", by="person", kind="note", title="x")
        )
    assert caught.value.errno == errno.ELOOP
    assert bashrc.read_text() == "# mine\n"
    # a label that is a link is not believed
    (home / "repo-key").unlink(missing_ok=True)
    target = tmp_path / "label"
    target.write_text("github.com/acme/shop\n")
    (home / "repo-key").symlink_to(target)
    assert read_key_file(home) is None
    # a reflections/ that is a link: refused with one line
    log.unlink()
    (log_dir / "mallory.jsonl").unlink()
    moved = tmp_path / "moved-reflections"
    log_dir.rename(moved)
    log_dir.symlink_to(moved, target_is_directory=True)
    with pytest.raises(RepoError, match="reflections is a symbolic link: refused"):
        open_store(None, repo, dict(env))


# -- visible text --------------------------------------------------------------------


def test_visible_count_and_strip_invisible():
    tags = "".join(chr(0xE0000 + ord(c)) for c in "rm -rf /")
    assert visible_count("\u200b" * 40 + "\u202e\u2066\ufeff" + tags + "\u3164\u2800 \t") == 0
    assert visible_count("shipped in abc123") == 15
    assert visible_count("e\u0301te\u0301") == 3  # decomposed accents draw on their letters
    assert strip_invisible(f"Deploy\u200b now\u202e{tags}\nnext") == "Deploy now\nnext"
    assert strip_invisible("cafe\u0301 \u2003ok") == "cafe\u0301  ok"


def test_the_ascii_fast_path_strips_exactly_what_the_per_character_rule_does():
    import random

    from reflect_jobs import invisible

    every = "".join(chr(c) for c in range(128))
    assert strip_invisible(every) == invisible._strip(every)
    assert "\x00" not in strip_invisible(every) and "\t\n\r" in strip_invisible(every)
    rng = random.Random(25)
    for _ in range(500):
        text = "".join(chr(rng.randrange(128)) for _ in range(rng.randrange(1, 80)))
        assert strip_invisible(text) == invisible._strip(text)
