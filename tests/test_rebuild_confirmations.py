"""``db rebuild`` brings confirmations and ``forget_after`` back from the notes (issue 23 item 2).

Notes are the source of truth: each mirrors its learning's ``confirmations`` and
``last_confirmed`` and keeps its own ``forget_after``. A ledger rebuilt from the notes
without them would call every learning never confirmed — the next confirmation would write a
count of 1 back into its note — and the hourly sweep would never forget an expired one.
Learnings are written with ``reflect-jobs add``, confirmed by the worker's confirmation path,
the ledger is rebuilt with ``db rebuild --force``, and the rows are compared.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from recall_support import make_repo
from sqlalchemy import select

from reflect_jobs.kb.parse import parse_note
from reflect_jobs.ledger.db import dispose_all, session_scope
from reflect_jobs.ledger.models import Learning
from reflect_jobs.pipeline.confirm import apply_confirmations
from reflect_jobs.pipeline.expiry import forget_expired


def _add(env, tmp_path, shop, title: str, extra: str = "") -> str:  # type: ignore[no-untyped-def]
    path = tmp_path / f"{title.replace(' ', '-')}.md"
    path.write_text(f"---\ntitle: {title}\nrule: {title}, always.\n{extra}---\nbody\n")
    return env.invoke("add", str(path), "--cwd", str(shop)).stdout.strip()


def _ledger(env) -> dict[str, tuple]:  # type: ignore[no-untyped-def]
    dispose_all()
    with session_scope(env.settings().db_url, readonly=True) as s:
        return {
            r.id: (
                r.confirmations,
                f"{r.last_confirmed_at:%Y-%m-%dT%H:%M:%S}" if r.last_confirmed_at else None,
                r.forget_after,
                r.status,
                r.scope,
            )
            for r in s.scalars(select(Learning))
        }


def test_db_rebuild_restores_confirmations_and_forget_after(env, tmp_path) -> None:
    shop = make_repo(tmp_path / "shop", "git@github.com:acme/shop.git")
    ttl = _add(env, tmp_path, shop, "Freeze deploys during the audit", "forget_after: 30d\n")
    dated = _add(env, tmp_path, shop, "Use the staging bucket", "forget_after: 2031-01-31\n")
    plain = _add(env, tmp_path, shop, "Run the linter before pushing")
    never = _add(env, tmp_path, shop, "Keep the changelog sorted")
    db, kb_path = env.settings().db_url, env.settings().kb_path
    done = apply_confirmations(
        kb_path,
        db,
        [[ttl, "get", None], [ttl, "update", "s-later"], [plain, "person", None]],
    )
    assert sorted(done) == sorted([ttl, ttl, plain])
    apply_confirmations(kb_path, db, [[dated, "update", "s-other"]])
    before = _ledger(env)
    assert [before[i][0] for i in (ttl, dated, plain, never)] == [2, 1, 1, 0]
    assert before[ttl][2] is not None and before[never][1:3] == (None, None)

    out = env.invoke("db", "rebuild", "--force").stdout
    assert "4 learning(s)" in out and "the counts, last confirmations and forget_after" in out
    after = _ledger(env)
    assert after == before

    # What the user meets next: a confirmation adds to the count the note had (not 1) …
    apply_confirmations(kb_path, db, [[plain, "update", "s-after-rebuild"]])
    with session_scope(db, readonly=True) as s:
        note_path = s.get(Learning, plain).note_path  # type: ignore[union-attr]
    assert parse_note(Path(note_path)).frontmatter["confirmations"] == 2
    # … and the hourly sweep still forgets the learning whose own TTL ran out.
    expired = before[ttl][2] + timedelta(seconds=1)
    assert forget_expired(kb_path, db, now=expired) == [ttl]
    assert _ledger(env)[ttl][3] == "archived"
