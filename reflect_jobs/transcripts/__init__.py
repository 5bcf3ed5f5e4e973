"""Transcript readers: Claude Code, Codex and Copilot session files → dialogue turns.

One streaming reader (``read_transcript``) and one small parser per harness; everything
downstream sees only ``Transcript``/``Turn``. Pure stdlib, safe to import from hooks.

The names below are imported on first use (PEP 562): the SessionStart hook imports one
harness's record parser (``recall/task_query.py``, after a compaction) and must not pay for
the streaming reader, the harness registry and ``hashlib`` it never uses.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the stdlib idiom: no `typing` import at run time (hooks import us)
if TYPE_CHECKING:
    from reflect_jobs.transcripts.model import Transcript, Turn, UnreadableTranscript
    from reflect_jobs.transcripts.reader import read_transcript
    from reflect_jobs.transcripts.sniff import detect_format

__all__ = ["Transcript", "Turn", "UnreadableTranscript", "detect_format", "read_transcript"]

_HOME = {
    "Transcript": "model",
    "Turn": "model",
    "UnreadableTranscript": "model",
    "read_transcript": "reader",
    "detect_format": "sniff",
}


def __getattr__(name: str) -> object:
    """Import a public name's module when the name is first read.

    Args:
        name: The attribute asked for.

    Returns:
        The object (cached in this module afterwards).

    Raises:
        AttributeError: ``name`` is not one of :data:`__all__`.
    """
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value
