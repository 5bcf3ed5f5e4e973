"""Transcript readers: Claude Code, Codex and Copilot session files → dialogue turns.

One streaming reader (``read_transcript``) and one small parser per harness; everything
downstream sees only ``Transcript``/``Turn``. Pure stdlib, safe to import from hooks.
"""

from reflect_jobs.transcripts.model import Transcript, Turn, UnreadableTranscript
from reflect_jobs.transcripts.reader import read_transcript
from reflect_jobs.transcripts.sniff import detect_format

__all__ = ["Transcript", "Turn", "UnreadableTranscript", "detect_format", "read_transcript"]
