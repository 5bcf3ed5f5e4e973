"""The one error an MCP tool raises for bad input or a refused call (ARCHITECTURE §13).

Its own module so the answers (:mod:`.tools`, :mod:`.item_tools`) and the server's boundary
(:mod:`.mcp_scope`) can all raise it without importing each other; :mod:`.mcp_server` turns
it into the SDK's error result (``isError``, one line).
"""

from __future__ import annotations


class ToolError(ValueError):
    """Bad tool input or a refused call; the message (one line) is shown to the agent."""
