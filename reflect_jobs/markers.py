"""Markers shared by the writer (which sets them) and the gate (which honours them).

Our own model calls are Claude Code sessions too: their transcripts land in
``~/.claude/projects`` and their hooks fire. Two independent guards stop us reflecting on
ourselves (SPEC-drain §10 B4):

* ``CHILD_ENV`` is set in the child's environment; every hook of ours is a no-op under it.
* ``CHILD_MARKER`` is the first line of every prompt we send; the gate skips any transcript
  whose first user turns *start* with it (``skip_reflect_on_reflect``), even if the env
  guard was lost (an older hook version, a harness that scrubs the environment).
"""

CHILD_ENV = "REFLECT_DRAIN_CHILD"
CHILD_MARKER = "<reflect-jobs:writer-child/>"

# Machine markers of the original reflect plugin's own runs (SPEC-drain §1.4, §10 B4), as
# the machines write them: Claude Code records the ``/reflect`` command with these tags at
# the start of the message, and the legacy drain's prompt is a ``/reflect`` line followed
# by a line starting with ``LEGACY_PROMPT_START`` (``transcripts/child.py`` matches both
# only there).
LEGACY_COMMAND_TAGS = (
    "<command-name>reflect</command-name>",
    "<command-name>/reflect</command-name>",
)
LEGACY_PROMPT_START = "process the transcript at:"
LEGACY_MARKERS = (*LEGACY_COMMAND_TAGS, LEGACY_PROMPT_START)
