"""``$REFLECT_HOME/hook-errors.log``: where every hook writes what went wrong (stdlib only).

Its own module so that the capture hook (``hook.py``) and the recall hook
(``recall/hook.py``, which ``hook.py`` imports) both write it without importing each other.
"""

from __future__ import annotations

import json
import os
import time

from reflect_jobs.envpaths import home_dir_str
from reflect_jobs.perms import DIR_MODE, FILE_MODE

ERROR_LOG_MAX_BYTES = 1 << 20


def log_error(message: str) -> None:
    """Append one JSON line ``{"ts", "error"}`` to ``$REFLECT_HOME/hook-errors.log``.

    One JSON line per failed hook; one rotated generation (``hook-errors.log.1``) once the
    log passes ``ERROR_LOG_MAX_BYTES`` (1 MiB), so a hook that fails on every agent turn for
    months cannot fill the disk. Never raises: a log that cannot be written (read-only home,
    full disk) is given up on, because the hook must never fail the agent's session.

    The message is secret-redacted first (a transcript path or a payload quoted in an error
    can hold a token), and the log is created 0600 in a 0700 home.

    Args:
        message: What went wrong, usually ``"<ExceptionType>: <message>"``. The written line
            is cut at 4000 characters.
    """
    try:
        # Imported here, not at the top: compiling the rules is only paid when a hook fails.
        from reflect_jobs.redaction import redact

        message = redact(message)
    except Exception:  # noqa: BLE001 - a broken redactor must not let the raw text through
        message = "hook failed (the message could not be redacted and is not logged)"
    try:
        home = home_dir_str()
        os.makedirs(home, mode=DIR_MODE, exist_ok=True)
        path = os.path.join(home, "hook-errors.log")
        try:
            if os.stat(path).st_size > ERROR_LOG_MAX_BYTES:
                os.replace(path, path + ".1")
        except FileNotFoundError:
            pass
        line = json.dumps(
            {"ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "error": message}
        )
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, FILE_MODE)
        with open(fd, "a", encoding="utf-8") as fh:
            fh.write(line[:4000] + "\n")
    except Exception:  # noqa: BLE001 - the hook must never fail the session
        pass
