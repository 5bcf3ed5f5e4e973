"""The one vocabulary of lifecycle words every layer shares: learning statuses, causal-relation
types, learning types, and job stages and states.

Before this module the knowledge base, the ledger, the index and the cascade each kept their
own set of "retired" statuses, and they disagreed (``deleted`` was retired for the notes but
not for the ledger; ``reverted``/``rejected`` the other way round), so a learning could be
gone from search yet still offered to the writer for UPDATE, or the reverse; and a note's
``learning_type`` was normalised while its ledger row kept the model's raw string. Every layer now
imports these names from here. Standard library only and free of imports, so the hook path,
the cascade and the CLI's option parsing can all use it at no cost.

Learning statuses are the *union* of the older sets, so nothing a user's notes or ledger hold
today stops being recognised as retired.
"""

from __future__ import annotations

# --- learning statuses (notes' frontmatter ``status`` and ``learnings.status``) -------------

#: The status of a learning that search, the revision block and dedup may use.
ACTIVE = "active"
#: Statuses of a learning that is kept (history stays greppable) but no longer used:
#: excluded from search, from the revision block and from the dedup checks.
RETIRED_STATUSES = frozenset(
    {"retired", "superseded", "archived", "deleted", "reverted", "rejected", "stale_anchors"}
)
#: A learning no model vouched for (the heuristic writer's, one below
#: ``REFLECT_REVIEW_BELOW`` confidence, or one whose only evidence is text the session read):
#: kept, searchable (marked), offered to the writer for UPDATE, but never told to a session
#: until a person accepts it or a later session confirms it (ARCHITECTURE §7.1).
PROPOSED = "proposed"
#: What a person's ``review reject`` sets: retired, and a later re-add does not revive it.
REJECTED = "rejected"
#: A learning whose anchors (the files it names) were gone at :data:`STALE_AFTER`
#: consecutive session starts (``recall/verify.py``): out of circulation like a retired
#: one — not told, not searched, not offered to the writer — but reversible: a person's
#: ``restore`` (``ledger/stale.py:restore``) makes it active again, and a later session
#: that learns it again with evidence brings it back as a new CREATE would.
STALE_ANCHORS = "stale_anchors"
#: Consecutive session-start verifications that found every anchor gone before a learning
#: becomes :data:`STALE_ANCHORS` (ARCHITECTURE §13.2).
STALE_AFTER = 3
#: What a person's ``forget`` sets (seed 003's soft archive; also the ``forget_after``
#: sweep's): retired, and the note and its sidecar moved to ``documents/.forgotten/`` so no
#: reader — search, the context store, MCP ``get`` — can reach it; ``restore`` undoes it.
ARCHIVED = "archived"
#: What a contradiction demotion sets (``ledger/contradiction.py``), with ``superseded_by``.
SUPERSEDED = "superseded"
#: Where a forgotten note and its sidecar wait: a hidden directory under ``documents/``, which
#: no reindex, ``iter_notes`` or ``get`` lists (they read ``documents/*.md`` only).
FORGOTTEN_DIR = ".forgotten"
#: Every status a learning may carry.
LEARNING_STATUSES = frozenset({ACTIVE, PROPOSED}) | RETIRED_STATUSES


def is_restorable(status: object) -> bool:
    """Whether ``restore`` may bring a learning with this status back into circulation.

    Generic on purpose: every status that takes a learning out of circulation — retired,
    superseded, archived (forgotten), and any later one (stale anchors, dormant) — may be
    undone by a person; only ``active`` (nothing to undo) and ``proposed`` (that is
    ``review accept``) are not.

    Args:
        status: A ledger row's or note's ``status`` (any type; missing means active).

    Returns:
        True for any non-blank status other than ``active`` and ``proposed``.
    """
    if not isinstance(status, str) or not status.strip():
        return False
    return status.strip().lower() not in (ACTIVE, PROPOSED)


def is_told(status: object) -> bool:
    """Whether a learning with this status may be told to a session (context block, prompt).

    Args:
        status: A note's frontmatter ``status`` or a ledger row's ``status`` (any type).

    Returns:
        True for ``active`` and for a missing status (a note written before statuses
        existed); False for ``proposed`` and every retired status.
    """
    if status is None or (isinstance(status, str) and not status.strip()):
        return True
    return isinstance(status, str) and status.strip().lower() == ACTIVE


def is_retired(status: object) -> bool:
    """Whether a learning with this status is out of use.

    Case and surrounding blanks are ignored (a hand-edited ``status: Retired`` is retired);
    a missing status means active, as for a note written before statuses existed.

    Args:
        status: A note's frontmatter ``status`` or a ledger row's ``status`` (any type).

    Returns:
        True for one of :data:`RETIRED_STATUSES`, False otherwise.
    """
    return isinstance(status, str) and status.strip().lower() in RETIRED_STATUSES


# --- causal relations between entities (notes' ``causal_relations``, sidecars) -------------

#: The closed enum of causal-relation types; the model's output is hostile input, so any
#: other value becomes :data:`DEFAULT_CAUSAL_TYPE`.
CAUSAL_TYPES = frozenset(
    {
        "caused_by", "causes", "enables", "prevents", "contradicts", "supersedes", "part_of",
        "uses", "solves", "requires", "relates_to", "implements", "configures", "triggers",
    }
)  # fmt: skip
#: The fallback type of a relation whose type is missing or unknown.
DEFAULT_CAUSAL_TYPE = "relates_to"


def normalise_causal_type(value: object) -> str:
    """The relation type to store for a model-supplied ``value``.

    Args:
        value: The ``type`` of a causal relation as the model gave it (any JSON value).

    Returns:
        ``value`` stripped and lower-cased when that is one of :data:`CAUSAL_TYPES`, else
        :data:`DEFAULT_CAUSAL_TYPE` (so ``"causes\\ninjected: pwned"`` is ``relates_to``).
    """
    if isinstance(value, str):
        norm = value.strip().lower()
        if norm in CAUSAL_TYPES:
            return norm
    return DEFAULT_CAUSAL_TYPE


# --- learning types (notes' ``learning_type`` and ``learnings.learning_type``) -------------

#: The model's classifications of a learning we keep; anything else is the default.
LEARNING_TYPES = frozenset(
    {
        "bug-fix", "correction", "gotcha", "decision", "convention", "pattern", "anti-pattern",
        "workaround", "preference", "insight", "how-to",
    }
)  # fmt: skip
#: The original drain's type for a learning the model did not classify (or misclassified).
DEFAULT_LEARNING_TYPE = "bug-fix"


def normalise_learning_type(value: object) -> str:
    """The learning type to store, in the note and in the ledger alike.

    Args:
        value: The ``learning_type`` the model gave (any JSON value).

    Returns:
        ``value`` stripped and lower-cased when that is one of :data:`LEARNING_TYPES`, else
        :data:`DEFAULT_LEARNING_TYPE`.
    """
    if isinstance(value, str):
        norm = value.strip().lower()
        if norm in LEARNING_TYPES:
            return norm
    return DEFAULT_LEARNING_TYPE


# --- job stages and states (``jobs.state``; the moves between them are ``ledger.moves.ALLOWED``) -------

#: The stages a job moves through, in order (``done`` once the add has committed).
JOB_STAGES = ("capture", "prepare", "write", "add", "done")
#: Every state a job can be in, in the order ``status`` and ``jobs --state`` list them.
JOB_STATES = (
    "queued", "running", "deferred", "retrying", "done", "poisoned", "quarantined", "halted"
)  # fmt: skip
#: A job in one of these is finished; only a person (``retry``) sends it back.
TERMINAL_STATES = frozenset({"done", "poisoned", "quarantined"})
#: States that wait for a person: a failed job, or the write stage halted.
NEEDS_PERSON_STATES = frozenset({"poisoned", "quarantined", "halted"})
#: States a worker may claim a job from.
RUNNABLE_STATES = ("queued", "deferred", "retrying")
#: Not finished: the job still holds its transcript (a new capture coalesces into it).
IN_FLIGHT_STATES = tuple(s for s in JOB_STATES if s not in TERMINAL_STATES)
#: Finished without success.
FAILED_STATES = tuple(s for s in JOB_STATES if s in TERMINAL_STATES and s != "done")
