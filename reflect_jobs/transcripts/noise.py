"""Machine text that is not dialogue, removed by every parser before a turn is kept.

Why each rule exists:

* ``<system-reminder>``, ``<local-command-stdout|stderr>``, ``<command-message>``,
  ``<command-name>`` blocks are written by the harness, not by a person. Left in, their
  imperative wording ("you must never…") would read as a user correction.
* ``<command-args>`` is the exception: it carries the words a person typed after a slash
  command (``/reflect later, but first: never use var``), so its *content* is kept.
* Recall context that our own hooks inject (``<reflect-recall>``) and the legacy recall tag
  (``<claude-mem-context>``), plus the harness wrapper of hook output
  (``<user-prompt-submit-hook>``), are our own words: reflecting on them would learn what we
  already know. Hooks that inject recall must wrap it in ``<reflect-recall>``.
* Our recall block (``<reflect-jobs-context>`` … ``</reflect-jobs-context>``, ARCHITECTURE
  §13: the SessionStart/UserPromptSubmit hooks and every MCP tool result) is dropped wherever
  it appears — a hook record, a system record, or pasted into a user turn — and, unlike the
  other blocks, fail-closed: an opening marker with no close drops the rest of the turn, a
  closing marker with no opening drops everything before it. Recalled learnings must never
  be learned again (the feedback loop that fills a memory with copies of itself).
* ``[Request interrupted by user…]`` lines are placeholders the harness writes.

Unclosed blocks are left alone here; the cascade's privacy filter strips them fail-closed.
"""

from __future__ import annotations

import re

_DROP_TAGS = (
    "system-reminder",
    "local-command-stdout",
    "local-command-stderr",
    "command-message",
    "command-name",
    "reflect-recall",
    "reflect-jobs-context",
    "claude-mem-context",
    "user-prompt-submit-hook",
)
_DROP_BLOCK = re.compile(
    r"<(" + "|".join(re.escape(t) for t in _DROP_TAGS) + r")\b[^>]*>.*?</\1\s*>",
    re.IGNORECASE | re.DOTALL,
)
_RECALL_OPEN = re.compile(r"<reflect-jobs-context\b[^>]*>", re.IGNORECASE)
_RECALL_CLOSE = re.compile(r"</reflect-jobs-context\s*>", re.IGNORECASE)
_ARGS_BLOCK = re.compile(r"<command-args\b[^>]*>(.*?)</command-args\s*>", re.IGNORECASE | re.DOTALL)
_INTERRUPTED = re.compile(r"^\s*\[Request interrupted by user[^\]]*\]\s*$", re.MULTILINE)

# Codex prepends these to the first user message; they are configuration, not dialogue.
_CODEX_PREAMBLE = re.compile(
    r"<(environment_context|user_instructions|INSTRUCTIONS)\b[^>]*>.*?</\1\s*>",
    re.IGNORECASE | re.DOTALL,
)
_CODEX_AGENTS_MD = re.compile(r"^\s*# AGENTS\.md instructions for .*", re.DOTALL)


def _drop_recall_remnants(text: str) -> str:
    """Fail closed on a recall block cut in half (the closed ones are gone already)."""
    if "reflect-jobs-context" not in text.lower():
        return text
    closes = list(_RECALL_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    opening = _RECALL_OPEN.search(text)
    if opening is not None:
        text = text[: opening.start()]
    return text


def clean_text(text: str) -> str:
    """Remove harness machine blocks; return the remaining human/agent words, stripped.

    Args:
        text: A turn's raw text.

    Returns:
        The text without closed drop-tag blocks (unclosed ones stay, except a recall
        block's halves, which take the rest of the text with them), with each
        ``<command-args>`` block replaced by its content and interrupt placeholder lines
        removed, stripped; ``""`` when nothing else was said.
    """
    if "<" in text:
        text = _DROP_BLOCK.sub("", text)
        text = _drop_recall_remnants(text)
        text = _ARGS_BLOCK.sub(lambda m: m.group(1), text)
    if "[Request interrupted" in text:
        text = _INTERRUPTED.sub("", text)
    return text.strip()


def clean_codex_text(text: str) -> str:
    """``clean_text`` plus Codex's environment/instructions preambles.

    Args:
        text: A Codex message's raw text.

    Returns:
        The text without ``<environment_context>``/``<user_instructions>``/``<INSTRUCTIONS>``
        blocks, then through :func:`clean_text`; ``""`` for a message that starts with an
        ``# AGENTS.md instructions for ...`` heading (it is dropped whole).
    """
    if "<" in text:
        text = _CODEX_PREAMBLE.sub("", text)
    text = _CODEX_AGENTS_MD.sub("", text)
    return clean_text(text)
