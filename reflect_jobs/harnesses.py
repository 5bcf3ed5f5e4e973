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

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from collections.abc import Mapping


class _Record:
    """A frozen record: fields named by ``__slots__``, set once by the constructor.

    What ``@dataclass(frozen=True)`` gives, without importing ``dataclasses`` (~20 ms with the
    ``inspect`` it pulls in, paid by the hook after every agent turn). Positional arguments
    fill the fields in ``__slots__`` order; every field must be given, except those with a
    value in ``_defaults``.
    """

    __slots__: tuple[str, ...] = ()
    #: Values of the trailing fields that may be left out (a field added later, so records
    #: written before it stay valid).
    _defaults: dict[str, object] = {}

    def __init__(self, *args: object, **kwargs: object) -> None:
        names = self.__slots__
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes {len(names)} fields")
        values = dict(zip(names, args, strict=False))
        for key, value in kwargs.items():
            if key not in names or key in values:
                raise TypeError(f"{type(self).__name__}: unexpected or repeated field {key!r}")
            values[key] = value
        for key, value in self._defaults.items():
            values.setdefault(key, value)
        missing = [n for n in names if n not in values]
        if missing:
            raise TypeError(f"{type(self).__name__}: missing fields {', '.join(missing)}")
        for name in names:
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, n) for n in self.__slots__)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values() == self._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def replace(self, **changes: object) -> _Record:
        """A copy with some fields changed (like ``dataclasses.replace``).

        Args:
            **changes: New values by field name.

        Returns:
            A new record of the same type.

        Raises:
            TypeError: A name is not a field.
        """
        return type(self)(**{**dict(zip(self.__slots__, self._values(), strict=True)), **changes})


#: What the hook does on an event: ``capture`` enqueues a capture of the session's transcript;
#: ``context`` is for a hook that prints context into the session (``SessionStart``, a later
#: feature) and never captures.
ROLES = ("capture", "context")


class HookEvent(_Record):
    """One hook event we install.

    Attributes:
        name: The event as the harness spells it in its settings (``Stop``, ``agentStop``);
            the installed command passes it to the hook as ``--event NAME``.
        timeout_sec: The timeout written into our entry for it (the harness kills the hook
            after it), in whole seconds.
        max_timeout_sec: The largest timeout the harness accepts on this event (Codex clamps
            a longer ``SessionEnd`` one to 3 s and warns on every start), or None when it
            documents no ceiling. ``install`` keeps a timeout already in our entry only when
            it is a whole number of seconds from 1 to this.
        role: One of :data:`ROLES` (default ``capture``).
    """

    __slots__ = ("name", "timeout_sec", "max_timeout_sec", "role")
    _defaults = {"max_timeout_sec": None, "role": "capture"}


class PayloadKeys(_Record):
    """Where a hook payload (the JSON on the hook's stdin) keeps each value.

    Each field is a tuple of keys tried in order; the first key holding a *value* wins. A
    key that is present but ``null`` or an empty string counts as absent (Codex sends
    ``"agent_transcript_path": null``, which must not hide a later key) — unlike the
    original's presence rule (SPEC-drain §2.4).

    Attributes:
        session_id: Keys of the session id (``unknown`` when none holds one).
        transcript_path: Keys of the transcript file. When none holds one, the hook derives
            the file from the session id (:attr:`Harness.transcript_files`) or refuses.
        event: Keys of the hook event's name (``unknown`` when none); the hook's ``--event``
            argument, which every installed command carries, overrides it.
        cwd: Keys of the session's working directory, against which a relative transcript
            path is resolved (else the hook's own working directory).
        subagent: Keys whose value marks a payload fired *inside* a subagent (Claude Code
            and Codex add ``agent_id`` there and only there). Such a payload is not a capture
            of the session: its transcript may be the subagent's own (Codex), and the
            parent's job must keep reading the parent's transcript.
    """

    __slots__ = ("session_id", "transcript_path", "event", "cwd", "subagent")
    _defaults = {"subagent": ()}


class TranscriptLayout(_Record):
    """Where a harness keeps its session transcripts, for ``backfill``.

    Attributes:
        root: The sessions directory, relative to the harness home.
        pattern: A ``pathlib`` glob under ``root`` matching one file per session.
        session_id: How a file names its session, which must be what the harness's hook
            sends so a backfilled job and a later hook capture coalesce: ``"stem"`` (the file
            name without ``.jsonl``), ``"parent"`` (the directory holding the file) or
            ``"uuid_tail"`` (the UUID the file name ends with; else the stem).
    """

    __slots__ = ("root", "pattern", "session_id")


SESSION_ID_SCHEMES = ("stem", "parent", "uuid_tail")


class Harness(_Record):
    """One harness, everything we know about it (see the module docstring).

    Attributes:
        name: The short name: the hook's and the CLI's ``--harness`` argument and the value
            of ``jobs.harness`` in the ledger (so never rename one).
        label: The product's name in messages (``Claude Code``).
        aliases: Other spellings :func:`resolve` accepts (``read_transcript(harness=…)``);
            the hook itself accepts only ``name``.
        home_env: The environment variable the harness itself reads for its home directory.
        home_default: The home directory when ``home_env`` is unset, relative to ``$HOME``.
        settings_file: The user-level hooks file ``install hooks`` edits, relative to home.
        present_markers: Paths relative to home whose existence shows the harness is set up
            here (``doctor`` skips a harness with none of them).
        hook_files_glob: A glob relative to home for every file the harness loads user-level
            hooks from (Copilot reads every ``hooks/*.json``), or None when it is only
            ``settings_file``.
        grouped: The hooks-table layout. True (Claude Code, Codex): each event lists matcher
            groups holding commands, ``{"Stop": [{"hooks": [{"type": "command", …}]}]}``.
            False (Copilot CLI): each event lists commands directly.
        command_keys: Keys of a hook entry that may hold its shell command; we write the
            first, and recognise our entries under any of them.
        timeout_key: The key of an entry's timeout in seconds (``timeout``/``timeoutSec``).
        skeleton: ``(key, value)`` pairs of the document of a settings file we create from
            nothing (Copilot wants ``"version": 1``); see :meth:`new_document`.
        events: The :class:`HookEvent` entries we install, in the order they are written.
        ignored_events: Events the hook never captures, even when an older install or a
            hand-written entry still runs it on them (the subagent lifecycle: see
            ``CLAUDE``'s comment). ``install`` removes our entries from every event that is
            not in ``events``.
        payload: The :class:`PayloadKeys` of its hook payload.
        transcript_files: Where the session's transcript is, relative to home, for a payload
            that names none: templates with ``{session_id}``, tried in order, the first that
            exists wins. Empty when every capture event's payload carries the path.
        transcripts: The :class:`TranscriptLayout` ``backfill`` scans.
        parser: ``"module:function"`` turning one decoded JSONL record into a
            ``ParsedRecord``; imported on first use (never by the hook).
        install_note: A line ``install hooks`` prints after installing, or None.
    """

    __slots__ = (
        "name",
        "label",
        "aliases",
        "home_env",
        "home_default",
        "settings_file",
        "present_markers",
        "hook_files_glob",
        "grouped",
        "command_keys",
        "timeout_key",
        "skeleton",
        "events",
        "ignored_events",
        "payload",
        "transcript_files",
        "transcripts",
        "parser",
        "install_note",
    )

    @property
    def event_names(self) -> tuple[str, ...]:
        """The names of :attr:`events`, in order."""
        return tuple(e.name for e in self.events)

    @property
    def command_key(self) -> str:
        """The key our entries put their command under."""
        return self.command_keys[0]

    def event(self, name: str) -> HookEvent | None:
        """Our :class:`HookEvent` called ``name``, if we install one.

        Args:
            name: An event name as the harness spells it.

        Returns:
            The record, or None.
        """
        return next((e for e in self.events if e.name == name), None)

    def new_document(self) -> dict:
        """A fresh copy of the document of a settings file we create from nothing.

        Returns:
            ``dict(skeleton)``: ``{}`` or ``{"version": 1}``.
        """
        return dict(self.skeleton)


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
#: is absent: its CLI discards the output of these hooks.
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
