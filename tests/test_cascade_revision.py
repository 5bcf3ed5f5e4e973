"""Related-learning recall and the revision block (SPEC-drain §3.5, §9.10 tests 104–107, B1)."""

from __future__ import annotations

import re

from reflect_jobs.cascade import (
    REVISION_MARKER,
    RelatedCandidate,
    Signal,
    related_learnings,
    revision_block,
)


def cand(
    id_: str, title: str, status: str = "active", created: str = "2026-01-01"
) -> RelatedCandidate:
    return RelatedCandidate(id_, title, "Code Style", status, 1, created)


def sig(text: str) -> Signal:
    return Signal(1, "HIGH", "correction", "Code Style", text, "user")


def test_title_overlap_matches_and_unrelated_excluded() -> None:  # 104
    related = related_learnings(
        [sig("Never use var in TypeScript, use const")],
        [
            cand("lrn-never-use-var-abc123", "Never use var in TypeScript"),
            cand("lrn-x-111111", "Docker layer caching"),
        ],
    )
    assert [(c.id, s) for c, s in related] == [("lrn-never-use-var-abc123", 1.0)]


def test_retired_excluded_limit_and_empty() -> None:  # 106
    cands = [
        cand(f"lrn-var-{i:06d}", "avoid var keyword", created=f"2026-01-{i + 1:02d}")
        for i in range(8)
    ]
    cands.append(cand("lrn-old-000000", "avoid var keyword", status="reverted"))
    cands.append(cand("lrn-sup-000000", "avoid var keyword", status="superseded"))
    related = related_learnings([sig("avoid the var keyword")], cands)
    assert len(related) == 5
    assert all(c.status == "active" for c, _ in related)
    assert [c.id for c, _ in related] == [
        f"lrn-var-{i:06d}" for i in range(5)
    ]  # oldest first on ties
    assert related_learnings([], cands) == []


def test_below_threshold_not_related() -> None:
    related = related_learnings(
        [sig("never use var")],
        [cand("lrn-a-000001", "database migrations need downgrade scripts always")],
    )
    assert related == []


def test_block_lists_kb_ids_exactly_and_explains_actions() -> None:  # 107, B1
    related = [(cand("lrn-never-use-var-abc123", "Never use var"), 1.0)]
    block = revision_block(related)
    assert block.startswith(REVISION_MARKER)
    assert REVISION_MARKER == "\n\n## Related existing learnings (belief revision)\n"
    after = block[len(REVISION_MARKER) :]
    # The writer's whitelist scans lrn- ids after the marker: it must find exactly ours.
    assert set(re.findall(r"lrn-[a-z0-9-]+", after)) == {"lrn-never-use-var-abc123"}
    for token in ("CREATE", "UPDATE", "DELETE", "target_id", "PREFER UPDATE OVER CREATE"):
        assert token in block
    assert "python3" not in block and "revise --source" not in block  # no shell command
    assert revision_block([]) == ""
