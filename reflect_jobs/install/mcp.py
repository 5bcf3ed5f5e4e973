"""``install hooks`` registers ``reflect-jobs mcp`` where each harness reads MCP servers.

* Claude Code: the user-scope ``mcpServers`` table of ``~/.claude.json``
  (``$CLAUDE_CONFIG_DIR/.claude.json`` when that is set), what ``claude mcp add -s user``
  writes.
* Codex: a ``[mcp_servers.reflect-jobs]`` table in ``~/.codex/config.toml``.
* Copilot CLI: the ``mcpServers`` table of ``~/.copilot/mcp-config.json``.

Same discipline as the hooks (:mod:`.hooks`, :mod:`.jsonfile`): parse or refuse, change only
our own entry (named ``reflect-jobs``), write only when something changed, back up first,
write atomically; ``--uninstall`` removes exactly that entry. The TOML file is edited as
text — our table is the block from its header to the next table header — because the
standard library reads TOML but cannot write it, and a rewrite would lose the user's
comments; the result is checked with ``tomllib`` before it is written.
"""

from __future__ import annotations

import json
import os
import re
import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .hook_paths import harness_home
from .jsonfile import SettingsFileError, dump_like, parse_json, read_settings, replace_settings

SERVER_NAME = "reflect-jobs"
#: Environment handed to the server (Copilot passes only PATH through; the others inherit).
FORWARDED_ENV = ("REFLECT_HOME", "GLOBAL_LEARNINGS_PATH", "REFLECT_DB_URL", "REFLECT_QUEUE_URL")


@dataclass
class McpChange:
    """What registering (or removing) the server did to one file."""

    path: Path
    action: str  # "added" | "updated" | "removed" | "unchanged" | "absent"
    backup: Path | None = None


def mcp_config_path(harness: str, environ: Mapping[str, str] | None = None) -> Path:
    """The file a harness reads its user-level MCP servers from.

    Args:
        harness: ``claude``, ``codex`` or ``copilot``.
        environ: The environment to read (default ``os.environ``).

    Returns:
        ``~/.claude.json`` (or ``$CLAUDE_CONFIG_DIR/.claude.json``),
        ``$CODEX_HOME/config.toml`` or ``$COPILOT_HOME/mcp-config.json``.
    """
    env = os.environ if environ is None else environ
    if harness == "claude":
        if (env.get("CLAUDE_CONFIG_DIR") or "").strip():
            return harness_home("claude", env) / ".claude.json"
        home = (env.get("HOME") or "").strip()
        return (Path(home) if home else Path.home()) / ".claude.json"
    if harness == "codex":
        return harness_home("codex", env) / "config.toml"
    return harness_home("copilot", env) / "mcp-config.json"


def server_entry(harness: str, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Our server's entry in a harness's JSON shape.

    Args:
        harness: ``claude``, ``codex`` or ``copilot``.
        environ: Where the forwarded variables are read (default ``os.environ``).

    Returns:
        ``{"type", "command", "args", "env"}`` (Copilot also ``"tools": ["*"]``), the
        command being the ``reflect-jobs`` next to this interpreter.
    """
    env = os.environ if environ is None else environ
    command = str(Path(os.path.abspath(sys.executable)).parent / "reflect-jobs")
    forwarded = {k: env[k] for k in FORWARDED_ENV if (env.get(k) or "").strip()}
    entry: dict[str, Any] = {
        "type": "local" if harness == "copilot" else "stdio",
        "command": command,
        "args": ["mcp"],
        "env": forwarded,
    }
    if harness == "copilot":
        entry["tools"] = ["*"]
    return entry


def merge_json(doc: Any, entry: Mapping[str, Any] | None) -> tuple[Any, str]:
    """Set (or with ``entry`` None remove) ``mcpServers["reflect-jobs"]`` in a JSON document.

    Args:
        doc: The parsed document (not modified).
        entry: Our entry, or ``None`` to remove it.

    Returns:
        ``(new document, action)``.

    Raises:
        SettingsFileError: The top level or ``mcpServers`` is not an object.
    """
    if not isinstance(doc, dict):
        raise SettingsFileError(f"top level is a JSON {type(doc).__name__}, expected an object")
    new = json.loads(json.dumps(doc))
    servers = new.get("mcpServers")
    if servers is not None and not isinstance(servers, dict):
        raise SettingsFileError('"mcpServers" is not a JSON object')
    if entry is None:
        if not servers or SERVER_NAME not in servers:
            return new, "absent"
        del servers[SERVER_NAME]
        if not servers:
            del new["mcpServers"]
        return new, "removed"
    servers = new.setdefault("mcpServers", {})
    old = servers.get(SERVER_NAME)
    if old == dict(entry):
        return new, "unchanged"
    servers[SERVER_NAME] = dict(entry)
    return new, "updated" if old is not None else "added"


_TABLE = re.compile(r"^\s*\[")
_OURS = re.compile(r'^\s*\[\s*mcp_servers\s*\.\s*(?:"reflect-jobs"|reflect-jobs)\s*(?:\]|\.)')


def _toml_str(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def toml_block(entry: Mapping[str, Any]) -> str:
    """Our ``[mcp_servers.reflect-jobs]`` table (and its ``env`` sub-table) as TOML text.

    Args:
        entry: From :func:`server_entry`.

    Returns:
        The block, ending in a newline.
    """
    args = ", ".join(_toml_str(a) for a in entry["args"])
    lines = [
        f"[mcp_servers.{SERVER_NAME}]",
        f"command = {_toml_str(entry['command'])}",
        f"args = [{args}]",
    ]
    if entry.get("env"):
        lines.append(f"[mcp_servers.{SERVER_NAME}.env]")
        lines += [f"{k} = {_toml_str(v)}" for k, v in entry["env"].items()]
    return "\n".join(lines) + "\n"


def merge_toml(text: str, entry: Mapping[str, Any] | None) -> tuple[str, str]:
    """Replace, add or remove our tables in a Codex ``config.toml``'s text.

    Args:
        text: The file's text (``""`` for a new file).
        entry: Our entry, or ``None`` to remove it.

    Returns:
        ``(new text, action)``.

    Raises:
        SettingsFileError: The file (before or after the edit) is not valid TOML.
    """
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsFileError(f"invalid TOML: {exc}") from None
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    ours: list[str] = []
    at = None
    inside = False
    for line in lines:
        if _TABLE.match(line):
            inside = bool(_OURS.match(line))
            if inside and at is None:
                at = len(kept)
        (ours if inside else kept).append(line)
    old_block = "".join(ours)
    if entry is None:
        if not ours:
            return text, "absent"
        new_text = "".join(kept).rstrip("\n") + ("\n" if kept else "")
        action = "removed"
    else:
        block = toml_block(entry)
        if old_block.strip() == block.strip():
            return text, "unchanged"
        if at is None:
            head = "".join(kept).rstrip("\n")
            new_text = f"{head}\n\n{block}" if head.strip() else block
        else:
            new_text = "".join(kept[:at]) + block + "\n" + "".join(kept[at:])
        action = "updated" if ours else "added"
    try:
        tomllib.loads(new_text)
    except tomllib.TOMLDecodeError as exc:  # pragma: no cover - our block is valid TOML
        raise SettingsFileError(f"edit would make invalid TOML: {exc}") from None
    return new_text, action


def apply_mcp(
    harness: str,
    *,
    path: Path | None = None,
    uninstall: bool = False,
    dry_run: bool = False,
    environ: Mapping[str, str] | None = None,
) -> McpChange:
    """Register (or remove) our MCP server in one harness's config file.

    Args:
        harness: ``claude``, ``codex`` or ``copilot``.
        path: The file (default :func:`mcp_config_path`).
        uninstall: Remove our entry instead.
        dry_run: Decide, write nothing.
        environ: The environment (default ``os.environ``).

    Returns:
        What happened (``action``) and the backup made.

    Raises:
        SettingsFileError: The file cannot be read or parsed; nothing is written then.
        OSError: The write failed.
    """
    path = path or mcp_config_path(harness, environ)
    current = read_settings(path)
    entry = None if uninstall else server_entry(harness, environ)
    if harness == "codex":
        new_text, action = merge_toml(current.text if current.exists else "", entry)
    else:
        doc = parse_json(current.text, path) if current.exists else {}
        try:
            new_doc, action = merge_json(doc, entry)
        except SettingsFileError as exc:
            raise SettingsFileError(f"{path}: {exc}; left untouched") from None
        new_text = dump_like(new_doc, current.text if current.exists else "")
    change = McpChange(path, action)
    if action in ("unchanged", "absent") or dry_run:
        return change
    change.backup = replace_settings(current, new_text)
    return change
