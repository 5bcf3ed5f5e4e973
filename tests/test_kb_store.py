"""KB files on disk: write/overwrite, lifecycle, atomic writes, sidecars, heuristics."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from support import PAGE, fill_fs, small_tmpfs

from reflect_jobs.kb import (
    NoteError,
    atomic_write,
    bump_note,
    heuristic_sidecar,
    iter_notes,
    kb_paths,
    learning_id,
    load_sidecar,
    parse_note,
    retire_note,
    write_learning,
)

T1, T2, T3 = "2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z", "2025-03-01T00:00:00Z"


def learning(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "title": "Pin the redis client",
        "category": "deps",
        "key_insight": "redis 5 changed the API",
        "problem": "ImportError: cannot import name 'StrictRedis'",
        "root_cause": "major upgrade",
        "fix": "pin redis<6",
        "rule": "Pin major versions",
        "confidence_num": 0.7,
        "tags": ["redis"],
        "entities": ["redis", "pip"],
        "causal_relations": [{"source": "upgrade", "target": "ImportError", "type": "causes"}],
        "body": "## Problem\nIt broke.",
    }
    base.update(over)
    return base


def write(kb: Path, lrn: dict[str, object] | None = None, **kw: object):
    args: dict[str, object] = dict(created=T1, updated=T1, source_path="/t.jsonl", session_id="s")
    args.update(kw)
    return write_learning(kb, lrn or learning(), **args)  # type: ignore[arg-type]


def files(kb: Path) -> list[str]:
    return sorted(p.name for p in (kb / "documents").iterdir())


def test_kb_paths_and_iter_notes(tmp_path: Path) -> None:
    paths = kb_paths(tmp_path / "kb")
    assert paths.documents.is_dir() and paths.index.is_dir() and paths.graph.is_dir()
    assert paths.graph.parent == paths.index
    assert list(iter_notes(tmp_path / "nope")) == []
    write(paths.root, learning(title="b"))
    write(paths.root, learning(title="a"))
    names = [p.name for p in iter_notes(paths.root)]
    assert names == sorted(names) and len(names) == 2


def test_write_learning_writes_note_and_sidecar(tmp_path: Path) -> None:
    nf = write(tmp_path)
    assert nf.id == learning_id("Pin the redis client", "Pin major versions")
    assert nf.path == tmp_path / "documents" / f"{nf.id}.md"
    assert nf.sidecar_path == tmp_path / "documents" / f"{nf.id}.entities.yaml"
    note = parse_note(nf.path)
    assert note.id == nf.id and note.frontmatter["session_id"] == "s"
    side = load_sidecar(nf.sidecar_path)
    assert side["document_id"] == nf.id
    assert {"redis", "pip"} <= {e["name"] for e in side["entities"]}
    import hashlib

    assert nf.content_hash == hashlib.sha256(nf.path.read_bytes()).hexdigest()
    assert files(tmp_path) == sorted([nf.path.name, nf.sidecar_path.name])  # no temp files


def test_readding_overwrites_one_file_and_keeps_created(tmp_path: Path) -> None:
    first = write(tmp_path)
    second = write(tmp_path, learning(key_insight="updated insight"), created=T2, updated=T2)
    assert first.id == second.id and first.path == second.path
    assert len(list(iter_notes(tmp_path))) == 1
    fm = parse_note(second.path).frontmatter
    assert fm["created"] == T1 and fm["updated"] == T2
    assert fm["key_insight"] == "updated insight"
    assert first.content_hash != second.content_hash


def test_readding_keeps_sources_and_proof_count(tmp_path: Path) -> None:
    nf = write(tmp_path)
    bump_note(nf.path, source="/t2.jsonl", proof_count=2, now=T2)
    again = write(tmp_path, updated=T3)
    fm = parse_note(again.path).frontmatter
    assert fm["sources"] == ["/t2.jsonl"] and fm["proof_count"] == 2


def test_write_requires_title(tmp_path: Path) -> None:
    with pytest.raises(NoteError, match="title"):
        write(tmp_path, learning(title="  \n "))
    assert not list(iter_notes(tmp_path))


def test_write_with_hostile_values_parses(tmp_path: Path) -> None:
    evil = "x\n---\ninjected: pwned\n---\n"
    nf = write(tmp_path, learning(title=evil, key_insight=evil, category=evil, body=evil))
    fm = parse_note(nf.path).frontmatter
    assert "injected" not in fm and fm["title"] == "x --- injected: pwned ---"


def test_retire_keeps_note_and_sets_status(tmp_path: Path) -> None:
    nf = write(tmp_path)
    before = parse_note(nf.path)
    out = retire_note(
        nf.path, status="superseded", reason="replaced\nby: better", superseded_by="lrn-b-1", now=T2
    )
    assert nf.path.exists() and out.path == nf.path
    after = parse_note(nf.path)
    assert after.frontmatter["status"] == "superseded"
    assert after.frontmatter["superseded_by"] == "lrn-b-1"
    assert after.frontmatter["retired_reason"] == "replaced by: better"
    assert after.frontmatter["updated"] == T2 and after.frontmatter["created"] == T1
    assert after.body == before.body
    assert "by" not in after.frontmatter
    assert out.content_hash != nf.content_hash
    with pytest.raises(ValueError):
        retire_note(nf.path, status="active", reason="x", now=T2)


def test_bump_adds_source_once(tmp_path: Path) -> None:
    nf = write(tmp_path)
    bump_note(nf.path, source="/a.jsonl", proof_count=2, now=T2)
    bump_note(nf.path, source="/a.jsonl", proof_count=3, now=T3)
    bump_note(nf.path, source="/b.jsonl", proof_count=4, now=T3)
    fm = parse_note(nf.path).frontmatter
    assert fm["sources"] == ["/a.jsonl", "/b.jsonl"] and fm["proof_count"] == 4
    assert fm["updated"] == T3 and fm["status"] == "active"


def test_lifecycle_rewrite_survives_hand_edited_frontmatter(tmp_path: Path) -> None:
    path = tmp_path / "n.md"
    path.write_text(
        "---\nid: lrn-hand-1\ntitle: Hand\ncategory: c\nkey_insight: k\n"
        "created: 2024-01-01\nodd-key: v\nnested: {a: [1, 2]}\n---\nbody\n"
    )
    retire_note(path, status="archived", reason="old", now=T2)
    fm = parse_note(path).frontmatter
    assert fm["status"] == "archived" and fm["odd-key"] == "v" and fm["nested"] == {"a": [1, 2]}
    assert fm["created"] == "2024-01-01"  # dates come back as text, not lost


# ---------------------------------------------------------------------------- atomic_write


@pytest.mark.chaos
@pytest.mark.parametrize("step", ["write", "fsync", "replace"])
def test_atomic_write_enospc_leaves_old_file_and_no_temp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step: str
) -> None:
    target = tmp_path / "note.md"
    target.write_text("old content")
    monkeypatch.setenv("REFLECT_FAILPOINTS", f"atomic_write:{step}=oserror:ENOSPC")
    with pytest.raises(OSError) as info:
        atomic_write(target, "new content " * 1000)
    monkeypatch.delenv("REFLECT_FAILPOINTS")
    assert info.value.errno == errno.ENOSPC and f"atomic_write:{step}" in str(info.value)
    assert target.read_text() == "old content"
    assert os.listdir(tmp_path) == ["note.md"]
    atomic_write(target, "new content")  # disarmed: the same call goes through
    assert target.read_text() == "new content" and os.listdir(tmp_path) == ["note.md"]


@pytest.mark.chaos
def test_atomic_write_partial_write_then_enospc(tmp_path: Path) -> None:
    """A real full filesystem: one page is free, so the first write is short, then ENOSPC."""
    with small_tmpfs(tmp_path / "fs", 64 * 1024) as fs:
        target = fs / "note.md"
        target.write_text("old")
        filler = fill_fs(fs, free_pages=1)
        with pytest.raises(OSError) as info:
            atomic_write(target, "x" * (3 * PAGE))
        assert info.value.errno == errno.ENOSPC
        assert target.read_text() == "old"
        assert sorted(os.listdir(fs)) == ["filler.bin", "note.md"], "the temp file was left"
        filler.unlink()
        atomic_write(target, "x" * (3 * PAGE))
        assert target.read_text() == "x" * (3 * PAGE)


@pytest.mark.chaos
def test_write_learning_enospc_on_note_keeps_old_note(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nf = write(tmp_path)
    old = nf.path.read_bytes()
    monkeypatch.setenv("REFLECT_FAILPOINTS", "atomic_write:fsync=oserror:ENOSPC")
    with pytest.raises(OSError) as info:
        write(tmp_path, learning(key_insight="new"), updated=T2)
    monkeypatch.delenv("REFLECT_FAILPOINTS")
    assert info.value.errno == errno.ENOSPC
    assert nf.path.read_bytes() == old
    assert files(tmp_path) == sorted([nf.path.name, nf.sidecar_path.name])


def test_atomic_write_preserves_mode_and_accepts_bytes(tmp_path: Path) -> None:
    target = tmp_path / "f"
    target.write_text("a")
    target.chmod(0o640)
    atomic_write(target, b"\x00bytes")
    assert target.read_bytes() == b"\x00bytes"
    assert target.stat().st_mode & 0o777 == 0o640


# ------------------------------------------------------------------------------- sidecars


def test_load_sidecar_defaults(tmp_path: Path) -> None:
    p = tmp_path / "s.entities.yaml"
    p.write_text(
        "document_id: lrn-a-1\nentities:\n  - {name: redis}\n"
        "relationships:\n  - {source: a, target: b}\n"
    )
    side = load_sidecar(p)
    assert side["entities"] == [{"name": "redis", "type": "concept", "description": ""}]
    rel = side["relationships"][0]
    assert rel["type"] == "relates_to" and rel["strength"] == 5 and rel["description"] == ""


@pytest.mark.parametrize(
    "text",
    [
        "entities: [unclosed\n",
        "- just a list\n",
        "entities: {a: 1}\n",
        "entities:\n  - not-a-mapping\n",
        "entities:\n  - {type: x}\n",
        "relationships:\n  - {source: a}\n",
        "relationships:\n  - {source: a, target: b, strength: strong}\n",
        "x: !!python/object/apply:os.system ['true']\n",
    ],
)
def test_load_sidecar_malformed(tmp_path: Path, text: str) -> None:
    p = tmp_path / "s.entities.yaml"
    p.write_text(text)
    with pytest.raises(NoteError):
        load_sidecar(p)


def test_load_sidecar_missing_file(tmp_path: Path) -> None:
    with pytest.raises(NoteError):
        load_sidecar(tmp_path / "nope.yaml")


def test_heuristic_sidecar(tmp_path: Path) -> None:
    nf = write(
        tmp_path,
        learning(
            body="## Problem\nRunning `uv sync` under Docker failed:\n"
            "KeyError: 'user_id'\nENOENT: no such file\nThen we used pnpm and postgres.\n"
            "Let's make a go of it, react calmly.",
            entities=["Huey"],
            tags=["queue"],
        ),
    )
    side = heuristic_sidecar(parse_note(nf.path))
    by_name = {e["name"]: e["type"] for e in side["entities"]}
    # The note's own entities, tags and causal ends first, then what its text names; at
    # most eight (the seed's 3-8), so the body's later names are left out.
    assert by_name["Huey"] == "technology" and by_name["queue"] == "concept"
    assert by_name["upgrade"] == by_name["ImportError"] == "concept"
    assert by_name["uv sync"] == "concept"
    assert {"redis", "docker"} <= set(by_name) and len(by_name) == 8
    assert not {"make", "go", "react"} & set(by_name)
    assert side["document_id"] == nf.id
    assert side["relationships"][0]["type"] == "causes"
    bare = learning(
        title="Retry the lookup",
        key_insight="",
        problem="",
        root_cause="",
        fix="",
        rule="Retry the lookup",
        tags=[],
        entities=[],
        causal_relations=[],
        body="## Problem\nKeyError: 'user_id' in the worker\nENOENT: no such file\n"
        "Then we used pnpm and postgres.",
    )
    side = heuristic_sidecar(parse_note(write(tmp_path, bare).path))
    by_name = {e["name"]: e["type"] for e in side["entities"]}
    assert by_name == {
        "pnpm": "technology",
        "postgres": "technology",
        "KeyError: 'user_id'": "error",
        "ENOENT: no such file": "error",
    }
    for ent in side["entities"]:
        assert set(ent) == {"name", "type", "description"}
