"""SQLite FTS5 lexical index: exact strings rank first, no query raises, recovery works."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reflect_jobs.index.fts_query import build_match
from reflect_jobs.index.lexical import LexicalIndex

DOCS = {
    "lrn-keyerror": (
        "KeyError on user lookup",
        "Traceback (most recent call last):\n  File \"app.py\"\nKeyError: 'user_id'\n"
        "The session dict lacked the key; use .get().",
    ),
    "lrn-graphml": (
        "Graph file corrupted after concurrent writes",
        "nano-graphrag wrote graph_chunk_entity_relation.graphml twice; repair truncates.",
    ),
    "lrn-foobar": (
        "Import cycle in helpers",
        "foo_bar.py imported baz/qux.py which imported foo_bar.py back.",
    ),
    "lrn-pnpm": (
        "Use pnpm not npm",
        "The repo has pnpm-lock.yaml; npm install rewrites the lockfile. Use pnpm.",
    ),
    "lrn-user": (
        "User records and ids",
        "Every user has an id; the user id is a UUID. Lookups by user are common.",
    ),
    "lrn-enoent": (
        "Hook path missing",
        "ENOENT: no such file or directory, open '/home/x/.claude/settings.json'",
    ),
}


def filler(i: int, rng: random.Random) -> tuple[str, str]:
    words = ["error", "file", "user", "key", "graph", "python", "cache", "lookup", "session"]
    return f"Note {i} about " + " ".join(rng.sample(words, 3)), " ".join(
        rng.choice(words) for _ in range(60)
    )


def _fill(idx: LexicalIndex) -> LexicalIndex:
    rng = random.Random(7)
    docs = [
        {"doc_id": d, "title": t, "body": b, "path": f"/kb/{d}.md", "content_hash": "h"}
        for d, (t, b) in DOCS.items()
    ]
    for i in range(200):
        title, body = filler(i, rng)
        docs.append(
            {"doc_id": f"lrn-fill-{i}", "title": title, "body": body, "path": "p",
             "content_hash": str(i)}
        )  # fmt: skip
    assert idx.upsert_many(docs) == 206
    return idx


@pytest.fixture
def index(tmp_path: Path) -> Iterator[LexicalIndex]:
    """A fresh index per test (for tests that change it)."""
    idx = _fill(LexicalIndex(tmp_path / "index" / "lexical.db"))
    yield idx
    idx.close()


@pytest.fixture(scope="module")
def ro_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LexicalIndex]:
    """One shared index for the read-only tests."""
    idx = _fill(LexicalIndex(tmp_path_factory.mktemp("lex") / "lexical.db"))
    yield idx
    idx.close()


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("KeyError: 'user_id'", "lrn-keyerror"),
        ("KeyError", "lrn-keyerror"),
        ("user_id", "lrn-keyerror"),
        ("graph_chunk_entity_relation.graphml", "lrn-graphml"),
        ("entity_relation", "lrn-graphml"),
        ("foo_bar.py", "lrn-foobar"),
        ("baz/qux.py", "lrn-foobar"),
        ("pnpm-lock.yaml", "lrn-pnpm"),
        ("ENOENT: no such file or directory", "lrn-enoent"),
        ("ENOENT", "lrn-enoent"),
        (".claude/settings.json", "lrn-enoent"),
        ("use pnpm", "lrn-pnpm"),
    ],
)
def test_exact_strings_rank_first(ro_index: LexicalIndex, query: str, expected: str) -> None:
    hits = ro_index.search(query, k=5)
    assert hits and hits[0][0] == expected, hits
    scores = [s for _, s in hits]
    assert scores == sorted(scores, reverse=True)


HOSTILE_QUERIES = [
    "", "   ", '"', '""', '"unbalanced', "*", "a*", "-", "--", "-x", "NOT", "AND OR NOT",
    "NEAR(a b)", "(", ")", "((a", "a:b", "title:KeyError", "^start", "{a b}", "+", "'",
    "\\", "\x00", "\ud800", "🎉", "日本語", "x" * 5000, " ".join(["w"] * 500), "*:*", "---",
    "col:", ":", "a OR", "OR a", "a AND", "NEAR", "rowid", "docs_fts",
]  # fmt: skip


@pytest.mark.parametrize("query", HOSTILE_QUERIES)
def test_hostile_queries_never_raise(ro_index: LexicalIndex, query: str) -> None:
    assert isinstance(ro_index.search(query), list)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(q=st.text(max_size=80))
def test_any_text_query_never_raises(ro_index: LexicalIndex, q: str) -> None:
    assert isinstance(ro_index.search(q), list)


def test_build_match_quotes_everything() -> None:
    assert build_match("") is None and build_match("--- *") is None
    assert build_match('say "hi"') == '"say ""hi""" OR "say" OR """hi"""'
    assert build_match("a_b.py") == '"a_b.py" OR idents : "abpy"'


def test_retired_filtered_unless_asked(index: LexicalIndex) -> None:
    index.upsert(
        "lrn-keyerror",
        title=DOCS["lrn-keyerror"][0],
        body=DOCS["lrn-keyerror"][1],
        path="p",
        content_hash="h2",
        status="retired",
    )
    assert "lrn-keyerror" not in [d for d, _ in index.search("KeyError: 'user_id'", k=50)]
    assert index.search("KeyError: 'user_id'", include_retired=True)[0][0] == "lrn-keyerror"


def test_upsert_replaces_and_remove_forgets(index: LexicalIndex) -> None:
    index.upsert("lrn-pnpm", title="Yarn berry", body="zzyzx plugin", path="p", content_hash="h9")
    assert "lrn-pnpm" not in [d for d, _ in index.search("pnpm-lock.yaml", k=50)]
    assert index.search("zzyzx") == [("lrn-pnpm", pytest.approx(index.search("zzyzx")[0][1]))]
    assert index.indexed_hashes()["lrn-pnpm"] == "h9"
    assert index.lookup("lrn-pnpm") == {"title": "Yarn berry", "path": "p", "status": "active"}
    index.remove("lrn-pnpm")
    index.remove("lrn-pnpm")  # idempotent
    assert index.search("zzyzx") == [] and "lrn-pnpm" not in index.indexed_hashes()
    assert index.lookup("lrn-pnpm") is None
    assert index.check()


def test_persistence_and_k(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with LexicalIndex(db) as idx:
        for i in range(5):
            idx.upsert(f"d{i}", title="same", body="common words", path="p", content_hash="h")
    with LexicalIndex(db) as idx:
        assert len(idx.search("common", k=3)) == 3
        assert idx.search("common", k=0) == []
        assert len(idx.indexed_hashes()) == 5


@pytest.mark.chaos
def test_corrupted_fts_detected_and_rebuilt(index: LexicalIndex) -> None:
    assert index.check()
    index._conn.execute("UPDATE docs_fts_data SET block = randomblob(64) WHERE id > 10")
    index._conn.commit()
    assert index.check() is False
    index.rebuild()
    assert index.check() and index.indexed_hashes() == {}
    index.upsert("a", title="KeyError", body="x", path="p", content_hash="h")
    assert index.search("KeyError")[0][0] == "a"


def test_metadata_fts_mismatch_detected(index: LexicalIndex) -> None:
    index._conn.execute("DELETE FROM docs WHERE doc_id = 'lrn-pnpm'")
    index._conn.commit()
    assert index.check() is False


@pytest.mark.chaos
@pytest.mark.parametrize("damage", ["header", "pages"])
def test_corrupted_file_detected_and_rebuilt(tmp_path: Path, damage: str) -> None:
    db = tmp_path / "l.db"
    with LexicalIndex(db) as idx:
        for i in range(300):
            idx.upsert(f"d{i}", title=f"t{i}", body="body text " * 50, path="p", content_hash="h")
        idx._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = bytearray(db.read_bytes())
    rng = random.Random(1)
    if damage == "header":
        raw[:100] = b"garbage!" * 12 + b"xxxx"
    else:
        for off in range(4096 * 2, len(raw), 4096):  # scribble over every page but the first two
            raw[off + 8 : off + 200] = rng.randbytes(192)
    db.write_bytes(bytes(raw))
    idx = LexicalIndex(db)  # must not raise
    assert idx.check() is False
    idx.rebuild()
    assert idx.check()
    idx.upsert("a", title="ok", body="fresh", path="p", content_hash="h")
    assert idx.search("fresh") and idx.search("fresh")[0][0] == "a"
    idx.close()


def test_database_is_wal(index: LexicalIndex) -> None:
    assert index._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert isinstance(index._conn, sqlite3.Connection)
