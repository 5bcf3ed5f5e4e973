"""Query scoring (naive/local) against the real packaged MiniLM, offline."""

from __future__ import annotations

import pytest
from graph_notes import ALL_DOCS


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("database ran out of available connection slots when traffic was high", "pg-pool"),
        ("container killed because it used too much memory", "k8s-oom"),
        ("scheduled job cannot find executables because of environment variables", "cron-env"),
        ("hidden characters at the start of a spreadsheet file's first column", "utf8-bom"),
        ("server storage filled up with log files", "log-rotation"),
    ],
)
def test_naive_query_finds_paraphrase(built, query, expected):
    hits = built.query(query, mode="naive", k=5)
    assert hits, "no hits"
    assert hits[0][0] == expected, hits
    assert all(isinstance(s, float) for _, s in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_local_query_uses_entities_and_neighbourhood(built):
    hits = built.query("pgbouncer", mode="local", k=5)
    assert hits[0][0] == "pg-pool"
    hits = built.query("borrow checker ownership", mode="local", k=3)
    assert hits[0][0] == "rust-borrow"


def test_doc_ids_and_stdout_clean(built, fresh, capsys):
    assert built.doc_ids() == {d.id for d in ALL_DOCS}
    fresh.upsert(ALL_DOCS[:3])
    fresh.query("anything", mode="local")
    out = capsys.readouterr().out
    assert out == "", f"index wrote to stdout: {out!r}"
