"""The JSON-lines framing the model service speaks (its pipe and the search socket).

One message is one JSON object on one line. A line longer than :data:`MAX_LINE` is refused
rather than buffered, so a stuck or hostile peer on the socket cannot make the worker read
without bound. Standard library only.
"""

from __future__ import annotations

import json
from typing import IO, Any

#: The longest message either side accepts, newline included (a search answer is a few KiB;
#: a reindex's error list is cut far below this).
MAX_LINE = 1 << 20


class ProtocolError(ValueError):
    """A message is too long, not one JSON object, or cut off."""


def encode(message: dict[str, Any]) -> bytes:
    """One message as its line.

    Args:
        message: A JSON-able dict (anything else inside is written as ``str()``).

    Returns:
        The compact JSON followed by ``\\n``.

    Raises:
        ProtocolError: The line would exceed :data:`MAX_LINE`.
    """
    line = json.dumps(message, separators=(",", ":"), default=str).encode() + b"\n"
    if len(line) > MAX_LINE:
        raise ProtocolError(f"message of {len(line)} bytes exceeds {MAX_LINE}")
    return line


def decode(line: bytes) -> dict[str, Any]:
    """Parse one line read with :func:`read_message`'s bound.

    Args:
        line: The bytes, ending with ``\\n``.

    Returns:
        The message.

    Raises:
        ProtocolError: Too long, cut off (no newline) or not a JSON object.
    """
    if len(line) > MAX_LINE or not line.endswith(b"\n"):
        raise ProtocolError("message too long or cut off")
    try:
        message = json.loads(line)
    except ValueError as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object")
    return message


def read_message(stream: IO[bytes]) -> dict[str, Any] | None:
    """Read the next message from a binary stream.

    Args:
        stream: A buffered binary reader (a pipe or ``socket.makefile("rb")``).

    Returns:
        The message, or ``None`` at end of stream.

    Raises:
        ProtocolError: See :func:`decode`.
    """
    line = stream.readline(MAX_LINE + 1)
    if not line:
        return None
    return decode(line)
