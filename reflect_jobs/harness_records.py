"""The record types of the harness registry (:mod:`reflect_jobs.harnesses`).

Split from the registry so it holds the harnesses' data and lookups and this module the
shapes: :class:`Harness`, :class:`HookEvent`, :class:`PayloadKeys`, :class:`TranscriptLayout`
on a small frozen-record base. Standard library only and cheap, like the registry: the hook
imports both after every agent turn, and ``dataclasses`` (with the ``inspect`` it pulls in)
would cost it ~20 ms.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not ``typing.TYPE_CHECKING``: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any, Self


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
        return (
            isinstance(other, _Record)
            and type(other) is type(self)
            and other._values() == self._values()
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._values()))

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def replace(self, **changes: object) -> Self:
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
    name: str
    timeout_sec: int
    max_timeout_sec: int | None
    role: str
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
    session_id: tuple[str, ...]
    transcript_path: tuple[str, ...]
    event: tuple[str, ...]
    cwd: tuple[str, ...]
    subagent: tuple[str, ...]
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
    root: str
    pattern: str
    session_id: str


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
    name: str
    label: str
    aliases: tuple[str, ...]
    home_env: str
    home_default: str
    settings_file: str
    present_markers: tuple[str, ...]
    hook_files_glob: str | None
    grouped: bool
    command_keys: tuple[str, ...]
    timeout_key: str
    skeleton: tuple[tuple[str, Any], ...]
    events: tuple[HookEvent, ...]
    ignored_events: tuple[str, ...]
    payload: PayloadKeys
    transcript_files: tuple[str, ...]
    transcripts: TranscriptLayout
    parser: str
    install_note: str | None

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

    def new_document(self) -> dict[str, Any]:
        """A fresh copy of the document of a settings file we create from nothing.

        Returns:
            ``dict(skeleton)``: ``{}`` or ``{"version": 1}``.
        """
        return dict(self.skeleton)
