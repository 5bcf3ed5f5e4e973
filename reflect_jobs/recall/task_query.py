"""The task a session is on when it starts: its last prompts, or its branch (stdlib only).

After a **compaction** or a **resume** the session is mid-task, and compaction is exactly
when an agent loses what it knew: the transcript's last user prompts say what the task is,
and the block ranks the learnings that task needs first (issue 25, item 2).

At a **fresh start** (``source`` ``startup``/``clear``, or none) no prompt exists yet; the
one thing that often names the task is the **branch** the person created for it
(``fix/flaky-redirect-e2e``). Its words are the ranking query, read from the checkout's
``HEAD`` file (no ``git`` process; a linked worktree's own ``HEAD``). A default or
long-lived branch (``main``, ``master``, ``dev``…) or a detached ``HEAD`` says nothing;
then the repository's **handoff** does, when one is open: the prompt a person or the
``/handoff`` skill left for the next session (:func:`handoff_task`) is that session's task
by definition. A reflector's handoff does not steer (it was written by a model from what
its session read: ``reflections/logscan.py:leads``), nor does a stale one (the open items
exclude it). With neither, the block ranks by strength and profile fit
(``recall/session_start.py``); so does a task whose words no learning holds above the
relevance floor (``alice/wip``, ``gh-4312``).

Only what the harness really sends is used: Claude Code's SessionStart payload carries
``source`` (``startup``/``resume``/``clear``/``compact``) and ``transcript_path``; Codex's
carries ``source`` (``startup``/``resume``) and ``transcript_path`` (``null`` for an
ephemeral session); Copilot's ``sessionStart`` names no transcript (docs/HARNESSES.md), so it
is never asked.

**Bounded and safe.** Only the last :data:`TAIL_BYTES` of the transcript are read, through
``fsio.open_regular`` with ``follow=False`` (a symbolic link is refused, a FIFO or a
directory is refused without blocking), and a line longer than :data:`MAX_LINE_BYTES` is
skipped undecoded. What a person said is told apart from everything else by the harness's
own record parser (``transcripts/claude.py``, ``transcripts/codex.py``): tool results,
``isMeta`` hook feedback, the summary a compacted session continues from, subagents'
dialogue and our own injected block (``<reflect-jobs-context>``, ``transcripts/noise.py``)
are not prompts. The text is untrusted, but it is only a ranking query
(``recall/relevance.py:rank_for_prompt``): it is never told.
"""

from __future__ import annotations

#: Sources whose session is mid-task (its transcript says what the task is).
TASK_SOURCES = ("compact", "resume")
#: The transcript's tail read at most (the last prompts are near its end).
TAIL_BYTES = 256 * 1024
#: A JSONL line longer than this is skipped (tool output, a pasted file), never decoded.
MAX_LINE_BYTES = 64 * 1024
#: User prompts taken, newest first.
PROMPTS = 3
#: Characters kept of each prompt (the ranking reads at most 8,000 in all).
PROMPT_CHARS = 2000
#: The harnesses whose transcript records this module can read, and their parser.
PARSERS = {
    "claude": "reflect_jobs.transcripts.claude",
    "codex": "reflect_jobs.transcripts.codex",
}


def task_text(harness: str, payload: dict) -> str:
    """The ranking query of a mid-task SessionStart: its last user prompts, newest first.

    Args:
        harness: ``claude`` or ``codex`` (any other names no transcript format we read).
        payload: The SessionStart payload.

    Returns:
        The prompts joined newest first, or ``""`` for a fresh start, a payload without a
        usable ``transcript_path``, or a transcript that cannot be read safely (a symbolic
        link, a FIFO, a directory, missing) or holds no prompt in its tail — the block then
        ranks by the branch (:func:`branch_task`, asked by ``session_start.session_block``).
    """
    if payload.get("source") not in TASK_SOURCES or harness not in PARSERS:
        return ""
    path = payload.get("transcript_path") or payload.get("transcriptPath")
    if not isinstance(path, str) or not path or "\0" in path:
        return ""
    prompts = last_prompts(path, harness)
    return "\n".join(p[:PROMPT_CHARS] for p in prompts)


#: Branches that name no task: default and long-lived ones.
_LONG_LIVED = """main master trunk develop development dev devel canary next stable staging
    production prod release live default gh-pages head"""
LONG_LIVED = frozenset(_LONG_LIVED.split())
#: Branch-name words that say what kind of change, not what it is about.
_NOISE = "feat feature features chore wip tmp temp scratch draft patch bugfix hotfix topic branch"
BRANCH_NOISE = frozenset(_NOISE.split())


def branch_task(root: str) -> str:
    """The ranking query a fresh start's branch gives: its words, or ``""``.

    Args:
        root: The repository's root (``Repo.root`` of a checkout).

    Returns:
        The branch's words with separators as spaces and the change-kind words
        (:data:`BRANCH_NOISE`) dropped; ``""`` for a long-lived branch (:data:`LONG_LIVED`,
        also as the last part: ``origin/main``), a detached ``HEAD`` or no repository.
    """
    from reflect_jobs.git_files import current_branch

    branch = current_branch(root)
    if not branch:
        return ""
    parts = branch.lower().split("/")
    if parts[-1] in LONG_LIVED:
        return ""
    words = " ".join(parts).replace("-", " ").replace("_", " ").replace(".", " ").split()
    return " ".join(w for w in words if w not in BRANCH_NOISE)[:PROMPT_CHARS]


def handoff_task(items: list[dict]) -> tuple[str, str]:
    """The ranking query a fresh start's open handoff gives, and the handoff's id.

    Args:
        items: The repository's open items as the block lists them (leading handoffs first,
            ``recall/items.py:open_items``).

    Returns:
        ``(title and body, "#id")`` of the first handoff a person or a skill wrote, bounded
        to :data:`PROMPT_CHARS`; ``("", "")`` when there is none.
    """
    from reflect_jobs.reflections.logscan import leads

    for item in items:
        if leads(item):
            text = f"{item.get('title') or ''}\n{item.get('body') or ''}".strip()
            return text[:PROMPT_CHARS], str(item.get("id") or "")
    return "", ""


def _tail_lines(path: str) -> list[bytes]:
    """The complete, non-blank lines of the file's last :data:`TAIL_BYTES`, last first."""
    import os

    from reflect_jobs.fsio import lines_backwards, open_regular

    with open_regular(path, follow=False) as fh:
        size = os.fstat(fh.fileno()).st_size
        tail = lines_backwards(fh, size, max(0, size - TAIL_BYTES), max_line=MAX_LINE_BYTES)
        return [line for line in tail if line.strip()]


def last_prompts(path: str, harness: str, count: int = PROMPTS) -> list[str]:
    """The last ``count`` user prompts of a transcript's tail, newest first.

    Args:
        path: The transcript (the payload's ``transcript_path``).
        harness: A key of :data:`PARSERS`.
        count: At most this many.

    Returns:
        The prompts (each as the harness's parser keeps a person's turn); ``[]`` when the
        file cannot be read safely or its tail holds none.
    """
    import importlib
    import json

    try:
        lines = _tail_lines(path)
    except (OSError, ValueError):
        return []  # missing, a link, a FIFO, a directory: a fresh start's block
    parse = importlib.import_module(PARSERS[harness]).parse_record
    out: list[str] = []
    for raw in lines:
        try:
            record = json.loads(raw)
        except ValueError:
            continue  # a torn or damaged line
        parsed = parse(record)
        if parsed is None or parsed.sidechain:
            continue
        out += [text for role, text, _ in reversed(parsed.turns) if role == "user"]
        if len(out) >= count:
            break
    return out[:count]
