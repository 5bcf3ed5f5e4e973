"""Stable learning ids (SPEC-drain §4.2).

The id is derived from the learning's *content* (title + rule), never from timestamps or the
file it came from, so re-adding the same finding lands on the same file and overwrites it
instead of creating a twin (SPEC-drain §10 B13, ARCHITECTURE §11 "a learning written twice").
"""

from __future__ import annotations

import hashlib
import re

_NON_SLUG = re.compile(r"[^a-z0-9]+")
SLUG_MAX = 60


def slugify(title: object) -> str:
    """Lower-case ``title``, turn every run of non-``[a-z0-9]`` into ``-``, cap at 60 chars.

    Only ASCII survives so the id is a safe file name on every filesystem and a bare YAML
    scalar; an all-symbol or non-Latin title falls back to ``learning`` (the hash keeps it
    unique).

    Args:
        title: Any value; ``None`` and empty become ``""`` before slugging, others go
            through ``str()``.

    Returns:
        At most :data:`SLUG_MAX` (60) characters of ``[a-z0-9-]`` with no leading or trailing
        ``-``, or ``"learning"`` when nothing survives.
    """
    slug = _NON_SLUG.sub("-", str(title or "").lower()).strip("-")
    slug = slug[:SLUG_MAX].rstrip("-")
    return slug or "learning"


def learning_id(title: str, rule: str) -> str:
    """``lrn-<slug>-<sha1(title.strip() or "untitled" + rule)[:6]>``, as the original drain.

    Kept bit-compatible with SPEC-drain §4.2 so ids already listed in belief-revision blocks
    (and in users' KBs) keep resolving after the migration.

    Args:
        title: The learning's title; blank (or ``None``) counts as ``"untitled"``.
        rule: The learning's rule; ``None`` counts as ``""``.

    Returns:
        The id, e.g. ``lrn-retry-on-409-3fa2c1``: the slug of the title and the first six hex
        digits of the SHA-1 of the stripped title followed by the rule.
    """
    title = str(title or "").strip() or "untitled"
    digest = hashlib.sha1((title + str(rule or "")).encode("utf-8", "surrogatepass")).hexdigest()
    return f"lrn-{slugify(title)}-{digest[:6]}"
