"""Notes without model-given entities get heuristic ones (issue item 12).

Before, the heuristic writer's notes were written with ``entities: []`` and the graph index
trusted that empty sidecar, so on a machine without a model the graph arm was empty.
"""

from __future__ import annotations

from pathlib import Path

from reflect_jobs.index.note_docs import graph_sidecar
from reflect_jobs.kb import load_sidecar, parse_note, write_learning
from reflect_jobs.writer.heuristic import heuristic_actions

T1 = "2026-07-01T10:00:00Z"
SLICE = (
    "# Reflect slice of s.jsonl\n\n"
    "Install the deps.\n"
    "No, never use npm here: use pnpm instead of npm, the lockfile is `pnpm-lock.yaml`.\n"
    "Running the Docker build with pnpm now.\n"
    "The root cause was that npm rewrote the lockfile inside Docker."
)


def _write(kb: Path, learning: dict):
    return write_learning(
        kb, learning, created=T1, updated=T1, source_path="/s.jsonl", session_id="s"
    )


def _heuristic_learning() -> dict:
    (action, *_rest) = heuristic_actions(SLICE)
    learning = action["learning"]
    assert learning["entities"] == [] and learning["causal_relations"] == []
    return learning


def test_heuristic_writer_notes_get_entities_and_relationships(tmp_path: Path) -> None:
    nf = _write(tmp_path / "kb", _heuristic_learning())
    side = load_sidecar(nf.sidecar_path)
    names = {e["name"].lower() for e in side["entities"]}
    assert 3 <= len(side["entities"]) <= 8
    assert {"npm", "pnpm"} <= names
    assert "heuristic" not in names  # the writer's bookkeeping tag is not a concept
    assert not any("extracted by" in n for n in names)  # "Extracted" is no errno like ENOENT
    assert 2 <= len(side["relationships"]) <= 6
    for rel in side["relationships"]:
        assert rel["source"].lower() in names and rel["target"].lower() in names
        assert rel["type"] == "relates_to"


def test_model_given_entities_are_kept_as_given(tmp_path: Path) -> None:
    learning = {
        **_heuristic_learning(),
        "entities": [{"name": "Corepack", "type": "technology", "description": "pins pnpm"}],
    }
    side = load_sidecar(_write(tmp_path / "kb", learning).sidecar_path)
    assert [e["name"] for e in side["entities"]] == ["Corepack"]
    assert side["relationships"] == []


def test_graph_fills_an_existing_empty_sidecar(tmp_path: Path) -> None:
    nf = _write(tmp_path / "kb", _heuristic_learning())
    # A note written by an older version: its sidecar has no entities at all.
    nf.sidecar_path.write_text(
        f"document_id: {nf.id}\nextracted_at: '{T1}'\nentities: []\nrelationships: []\n"
    )
    side = graph_sidecar(parse_note(nf.path))
    assert len(side["entities"]) >= 3 and len(side["relationships"]) >= 2


def test_graph_keeps_a_sidecar_with_entities(tmp_path: Path) -> None:
    learning = {**_heuristic_learning(), "entities": ["Corepack"]}
    nf = _write(tmp_path / "kb", learning)
    assert [e["name"] for e in graph_sidecar(parse_note(nf.path))["entities"]] == ["Corepack"]


def test_a_redaction_tag_is_never_an_entity(tmp_path: Path) -> None:
    # A field the redactor replaced says what was removed ("secret"), not what the note is
    # about; a note with few names must not fill up with it.
    learning = {
        **_heuristic_learning(),
        "title": "Never use a bare except",
        "rule": "Never use a bare except.",
        "key_insight": "[REDACTED:secret]",
        "problem": "[REDACTED:password]",
        "body": "## Context\nNo, never use a bare except.\nFixed by catching KeyError.",
        # The learning now carries its evidence (the slice's pnpm quote), whose names
        # alone reach MIN_ENTITIES; this note's own evidence keeps it a note with few
        # names, which is what the concept fill must find beside the redaction tags.
        "evidence": "No, never use a bare except.",
        "tags": ["heuristic"],
    }
    side = load_sidecar(_write(tmp_path / "kb", learning).sidecar_path)
    names = {e["name"].lower() for e in side["entities"]}
    assert {"bare except", "keyerror"} <= names
    assert not names & {"secret", "password", "redacted", "redacted:secret"}
