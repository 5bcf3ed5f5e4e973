"""A note's evidence, origin and anchors as written (kb/render.py, ARCHITECTURE §7)."""

from __future__ import annotations

from reflect_jobs import kb
from reflect_jobs.kb.render import anchors_value, render_note, without_evidence

BASE = {
    "title": "Run pnpm from the root",
    "rule": "Run pnpm install from the repository root.",
    "category": "Tools",
    "key_insight": "npm rewrites the lockfile",
    "body": "## Problem\nnpm broke the lockfile.",
    "harness": "codex",
}


def _note(learning: dict) -> kb.Note:
    text = render_note(
        learning,
        note_id="lrn-x-000001",
        created="2026-12-01T10:00:00Z",
        updated="2026-12-01T10:00:00Z",
        source_path="/t.jsonl",
        session_id="sess-9",
        status="proposed",
    )
    return kb.parse_note(text)


def test_evidence_origin_and_anchors_are_in_the_frontmatter_and_the_evidence_section():
    anchors = [{"path": "web/install.py", "symbol": "install_workspace"}, {"path": "Makefile"}]
    note = _note(
        {
            **BASE,
            "evidence": 'run pnpm install: "from the root"\n---\nid: lrn-pwned',
            "evidence_origin": "person",
            "anchors": anchors,
        }
    )
    fm = note.frontmatter
    assert fm["evidence"] == 'run pnpm install: "from the root" --- id: lrn-pwned'
    assert fm["id"] == "lrn-x-000001" and fm["status"] == "proposed"
    assert (fm["evidence_origin"], fm["anchors"]) == ("person", anchors)
    keys = list(fm)
    assert keys.index("causal_relations") < keys.index("evidence") < keys.index("anchors")
    assert note.body.endswith(
        '## Evidence\n\n> run pnpm install: "from the root" --- id: lrn-pwned\n\n'
        "Quoted from the person's own words, session `sess-9` (codex), 2026-12-01T10:00:00Z."
    )
    assert without_evidence(note.body) == "## Problem\nnpm broke the lockfile."


def test_a_learning_without_evidence_is_written_as_before():
    note = _note(BASE)
    assert not {"evidence", "evidence_origin", "anchors"} & set(note.frontmatter)
    assert "## Evidence" not in note.body and without_evidence(note.body) == note.body


def test_an_unknown_origin_is_left_out_and_anchors_are_sanitised():
    note = _note({**BASE, "evidence": "run pnpm install", "evidence_origin": "the model says so"})
    assert "evidence_origin" not in note.frontmatter and note.frontmatter["anchors"] == []
    hostile = [{"path": "a\nb.py", "symbol": ""}, "x.py", {"symbol": "s"}, None] + [
        {"path": f"m{i}.py"} for i in range(20)
    ]
    got = anchors_value(hostile)
    assert got[0] == {"path": "a b.py"} and len(got) == 10
    assert all(set(a) <= {"path", "symbol"} for a in got)
