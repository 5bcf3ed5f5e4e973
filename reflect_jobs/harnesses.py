"""The one registry of the agent harnesses we hook into: Claude Code, Codex CLI, Copilot CLI.

Everything reflect-jobs knows about a harness lives in its :class:`Harness` record below:
where its home directory is, which settings file ``install hooks`` edits and in which shape,
which hook events we install and with which timeouts, which keys its hook payload uses,
where its transcripts are for ``backfill``, and which module parses them. ``hook``,
``install``, ``doctor``, ``backfill``, ``transcripts`` and the CLI read these records and
hold no harness knowledge of their own, so a change to a harness (a new event, a payload
without ``transcriptPath``, another timeout) is an edit here and nowhere else.

The hook imports this module after every agent turn, so it is standard library only and
cheap: the records are small frozen classes (immutable, compared by value, ``replace()``
for a variant) rather than dataclasses, whose import alone costs ~20 ms (it pulls in
``inspect``); the parser is a module path string that :mod:`reflect_jobs.transcripts.reader`
imports lazily, so the hook never loads a parser.

Each record's comment names the upstream documentation or source its contract was checked
against; ``docs/HARNESSES.md`` is the same contract for people.
"""

from __future__ import annotations

import os

from reflect_jobs.harness_records import (
    ROLES,
    SESSION_ID_SCHEMES,
    Harness,
    HookEvent,
    PayloadKeys,
    TranscriptLayout,
)

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from collections.abc import Mapping


__all__ = [  # the record types live in harness_records; re-exported as the registry's API
    "ROLES",
    "SESSION_ID_SCHEMES",
    "Harness",
    "HookEvent",
    "PayloadKeys",
    "TranscriptLayout",
]

#: The file we own outright in a harness's hooks directory (Copilot); removed when it empties.
OWN_SETTINGS_FILE = "reflect-jobs.json"
#: Timeout of the per-turn events (Stop, PreCompact): the hook only enqueues (tens of ms) and
#: the harnesses default to far more (Claude Code and Codex 600 s, Copilot CLI 30 s), so 5 s
#: is a generous ceiling that still stops a wedged hook from holding a turn for minutes.
_TURN_TIMEOUT = 5
#: Timeout of a session's end. The user is waiting for the agent to exit, and the harnesses
#: budget little: Claude Code shares 1.5 s among all SessionEnd hooks and raises that to the
#: longest per-hook timeout (at most 60 s); Codex defaults to 1 s and clamps anything above
#: 3 s with a warning on every start. The hook finishes in well under 1 s, so 3 s — Codex's
#: ceiling — is headroom for a loaded machine, accepted by every harness.
_END_TIMEOUT = 3
#: Copilot CLI and Codex name the subagent events like Claude Code (PascalCase is Copilot's
#: VS Code-compatible spelling, camelCase its own).
_SUBAGENT_EVENTS = ("SubagentStop", "SubagentStart", "subagentStop", "subagentStart")

# Claude Code — https://code.claude.com/docs/en/hooks ("Hooks reference"; mirrored in
# thevibeworks/claude-code-docs content/en/docs/claude-code/hooks.md). Settings:
# $CLAUDE_CONFIG_DIR/settings.json (default ~/.claude), grouped {"hooks": {Event: [{"hooks":
# [{"type": "command", "command", "timeout"}]}]}}. Common input: session_id, transcript_path,
# cwd, hook_event_name (+ agent_id, agent_type only when the hook fires inside a subagent).
# PreCompact adds trigger; SessionEnd adds reason and "hooks have a default timeout of 1.5
# seconds … raised to the highest per-hook timeout … up to 60 seconds"; command hooks
# otherwise default to 600 s. SubagentStop: "The transcript_path is the main session's
# transcript, while agent_transcript_path is the subagent's own transcript stored in a nested
# subagents/ folder" — and session_id is the parent's, so preferring agent_transcript_path
# made every subagent replace the parent session's transcript in its coalesced job. We do not
# install SubagentStop: the parent's Stop fires when the main agent has finished responding,
# after the subagent's result is in the parent transcript, and SessionEnd closes the session;
# a SubagentStop capture could only re-read the same parent file, once per subagent ("many
# subagents running in parallel means these hooks fire a lot"). A subagent's own compaction
# fires PreCompact with the parent's session_id and transcript_path (anthropics/claude-code
# #91910), which is a capture of the parent like any other.
CLAUDE = Harness(
    name="claude",
    label="Claude Code",
    aliases=("claude-code", "claude_code"),
    home_env="CLAUDE_CONFIG_DIR",
    home_default=".claude",
    settings_file="settings.json",
    present_markers=("settings.json",),
    hook_files_glob=None,
    grouped=True,
    command_keys=("command",),
    timeout_key="timeout",
    skeleton=(),
    events=(
        HookEvent("PreCompact", _TURN_TIMEOUT),
        HookEvent("Stop", _TURN_TIMEOUT),
        HookEvent("SessionEnd", _END_TIMEOUT, max_timeout_sec=60),
        HookEvent("SessionStart", _TURN_TIMEOUT, role="context"),  # recall (ARCHITECTURE §13)
    ),
    ignored_events=_SUBAGENT_EVENTS[:2],
    payload=PayloadKeys(
        session_id=("session_id",),
        transcript_path=("transcript_path",),
        event=("hook_event_name",),
        cwd=("cwd",),
        subagent=("agent_id",),
    ),
    transcript_files=(),
    transcripts=TranscriptLayout("projects", "*/*.jsonl", "stem"),  # projects/<p>/<id>.jsonl
    parser="reflect_jobs.transcripts.claude:parse_record",
    install_note=None,
)

# Codex CLI — https://developers.openai.com/codex/hooks; openai/codex codex-rs/hooks. Settings:
# $CODEX_HOME/hooks.json (default ~/.codex), Claude Code's grouped shape. Inputs
# (codex-rs/hooks/schema/generated/{stop,pre-compact,subagent-stop}.command.input.schema.json):
# session_id, transcript_path (string or null), cwd, hook_event_name, model, turn_id; PreCompact
# adds trigger. SessionEnd since rust-v0.145.0 (openai/codex#33895): root sessions only, reason
# "other", SESSION_END_DEFAULT_TIMEOUT_SEC = 1 and SESSION_END_MAX_TIMEOUT_SEC = 3
# (codex-rs/hooks/src/events/session_end.rs; discovery.rs normalize_command_hook clamps a
# longer one and warns at every start); other events default to 600 s with no ceiling. A
# version before 0.145 ignores the unknown SessionEnd key. SubagentStop (openai/codex#22873):
# transcript_path is the parent thread's rollout, agent_transcript_path the child's or null
# (codex-rs/core/src/hook_runtime.rs, run_turn_stop_hooks); hooks fired inside a thread-spawned
# subagent carry agent_id (openai/codex#22882) and the child's own transcript_path.
CODEX = Harness(
    name="codex",
    label="Codex",
    aliases=(),
    home_env="CODEX_HOME",
    home_default=".codex",
    settings_file="hooks.json",
    present_markers=("hooks.json", "config.toml"),
    hook_files_glob=None,
    grouped=True,
    command_keys=("command",),
    timeout_key="timeout",
    skeleton=(),
    events=(
        HookEvent("PreCompact", _TURN_TIMEOUT),
        HookEvent("Stop", _TURN_TIMEOUT),
        HookEvent("SessionEnd", _END_TIMEOUT, max_timeout_sec=3),
        HookEvent("SessionStart", _TURN_TIMEOUT, role="context"),  # recall (ARCHITECTURE §13)
    ),
    ignored_events=_SUBAGENT_EVENTS[:2],
    payload=PayloadKeys(
        session_id=("session_id",),
        transcript_path=("transcript_path",),
        event=("hook_event_name",),
        cwd=("cwd",),
        subagent=("agent_id",),
    ),
    transcript_files=(),
    # sessions/YYYY/MM/DD/rollout-<timestamp>-<uuid>.jsonl
    transcripts=TranscriptLayout("sessions", "**/rollout-*.jsonl", "uuid_tail"),
    parser="reflect_jobs.transcripts.codex:parse_record",
    install_note="Codex asks you to review and trust new hooks the next time it starts.",
)

# Copilot CLI — https://docs.github.com/en/copilot/reference/copilot-cli-reference/
# cli-hooks-reference (github/docs content/copilot/reference/copilot-cli-reference/
# cli-hooks-reference.md). Files: every hooks/*.json in $COPILOT_HOME (default ~/.copilot),
# {"version": 1, "hooks": {event: [{"type": "command", "bash", "powershell", "timeoutSec"}]}},
# timeoutSec defaulting to 30. An event configured in camelCase gets camelCase fields and NO
# event-name field (hence --event); PascalCase gets the VS Code-compatible snake_case payload
# with hook_event_name. agentStop, preCompact and subagentStop carry sessionId, timestamp (ms),
# cwd, transcriptPath; sessionStart and sessionEnd carry only sessionId, timestamp, cwd (and
# source / reason) — no transcriptPath. The transcript is then
# $COPILOT_HOME/session-state/<sessionId>/events.jsonl, the directory named by the session id
# (github/copilot-cli#3551; ingo-eichhorst/Irrlicht#1256); older CLIs wrote a flat
# session-state/<sessionId>.jsonl (the project's issue; not found upstream). Subagent turns are
# written into the parent's events.jsonl, so subagentStop adds nothing for the session's job.
COPILOT = Harness(
    name="copilot",
    label="Copilot CLI",
    aliases=("copilot-cli",),
    home_env="COPILOT_HOME",
    home_default=".copilot",
    # Copilot CLI loads every *.json in its user hooks directory, so we get a file of our own
    # instead of editing a shared one (its config.json is rewritten by the CLI itself, which
    # drops a "hooks" key: github/copilot-cli#3403).
    settings_file="hooks/" + OWN_SETTINGS_FILE,
    present_markers=("hooks", "config.json"),
    hook_files_glob="hooks/*.json",
    grouped=False,
    command_keys=("bash", "powershell"),
    timeout_key="timeoutSec",
    skeleton=(("version", 1),),
    events=(
        HookEvent("preCompact", _TURN_TIMEOUT),
        HookEvent("agentStop", _TURN_TIMEOUT),
        HookEvent("sessionEnd", _END_TIMEOUT),
        # Recall (ARCHITECTURE §13): Copilot CLI injects a sessionStart hook's
        # {"additionalContext"} since 1.0.11 (its changelog; obra/superpowers v5.0.7 relies
        # on it). 1.0.8 discarded it (github/copilot-cli#2142); an older CLI ignores it.
        HookEvent("sessionStart", _TURN_TIMEOUT, role="context"),
    ),
    ignored_events=_SUBAGENT_EVENTS,
    payload=PayloadKeys(
        session_id=("sessionId", "session_id"),
        transcript_path=("transcriptPath", "transcript_path"),
        event=("hook_event_name", "hookEventName"),
        cwd=("cwd",),
        subagent=(),
    ),
    transcript_files=(
        "session-state/{session_id}/events.jsonl",
        "session-state/{session_id}.jsonl",
    ),
    transcripts=TranscriptLayout("session-state", "*/events.jsonl", "parent"),  # <id>/events
    parser="reflect_jobs.transcripts.copilot:parse_record",
    install_note=None,
)

#: Events installed only while an environment variable is on at install time (ARCHITECTURE
#: §13): per-prompt recall costs an interpreter start on every prompt, so it is opt-in. Copilot
#: is absent: its CLI reads no context from a userPromptSubmitted hook.
OPT_IN_EVENTS: dict[str, tuple[tuple[str, HookEvent], ...]] = {
    "claude": (
        ("REFLECT_RECALL_ON_PROMPT", HookEvent("UserPromptSubmit", _TURN_TIMEOUT, role="context")),
    ),
    "codex": (
        ("REFLECT_RECALL_ON_PROMPT", HookEvent("UserPromptSubmit", _TURN_TIMEOUT, role="context")),
    ),
}

#: Every harness by name, in the order the CLI, ``install`` and ``doctor`` list them.
REGISTRY: dict[str, Harness] = {h.name: h for h in (CLAUDE, CODEX, COPILOT)}
#: The names the hook and the CLI's ``--harness`` accept.
NAMES: tuple[str, ...] = tuple(REGISTRY)
#: Every key any harness may keep a hook command under, for recognising our entries in a
#: file of any shape (in registry order: ``command``, ``bash``, ``powershell``).
COMMAND_KEYS: tuple[str, ...] = tuple(
    dict.fromkeys(k for h in REGISTRY.values() for k in h.command_keys)
)
_ALIASES = {alias: h.name for h in REGISTRY.values() for alias in h.aliases}
#: What a session id may be made of before it names a file (no separator, no "..").
_SAFE_ID = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


def get(name: str) -> Harness:
    """The record of the harness called ``name`` (its short name, not an alias).

    Args:
        name: One of :data:`NAMES`.

    Returns:
        Its :class:`Harness`.

    Raises:
        KeyError: No harness has that name; the message lists the known ones.
    """
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown harness {name!r}; expected one of {', '.join(NAMES)}") from None


def resolve(name: str) -> str | None:
    """The short name for a harness name or alias.

    Args:
        name: A short name (``claude``) or an alias (``claude-code``).

    Returns:
        The short name, or None when ``name`` is neither.
    """
    if name in REGISTRY:
        return name
    return _ALIASES.get(name)


def home_of(spec: Harness, environ: Mapping[str, str] | None = None) -> str:
    """The harness's home directory, honouring the variable the harness itself reads.

    Standard library only (the hook derives Copilot transcripts with it).

    Args:
        spec: The harness.
        environ: The environment to read (default ``os.environ``).

    Returns:
        ``$<home_env>`` with ``~`` expanded, else ``$HOME/<home_default>``.
    """
    env = os.environ if environ is None else environ
    raw = (env.get(spec.home_env) or "").strip()
    if raw:
        return os.path.expanduser(raw)
    home = (env.get("HOME") or "").strip() or os.path.expanduser("~")
    return os.path.join(home, spec.home_default)


def transcript_candidates(
    spec: Harness, session_id: str, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The files that may hold a session's transcript when its payload names none.

    Args:
        spec: The harness.
        session_id: The session id from the payload.
        environ: The environment to read (default ``os.environ``).

    Returns:
        Absolute paths from :attr:`Harness.transcript_files`, in order; empty when the
        harness has no such templates.

    Raises:
        ValueError: The session id is empty, ``unknown``, or not safe to put in a file name
            (a path separator, ``..``, a leading dot): a payload must not point us at a file
            outside the harness's session directory.
    """
    if not spec.transcript_files:
        return []
    if (
        not session_id
        or session_id == "unknown"
        or session_id.startswith(".")
        or not set(session_id) <= _SAFE_ID
    ):
        raise ValueError(f"session id {session_id[:80]!r} cannot name a transcript file")
    home = home_of(spec, environ)
    return [os.path.join(home, t.format(session_id=session_id)) for t in spec.transcript_files]
