"""structlog setup: JSON lines to ``$REFLECT_HOME/drain.log`` (rotated), readable on a TTY.

Every stage transition is logged with job id, stage, state and outcome, so ``drain.log``
alone reconstructs what happened to a job even if the ledger is gone. Every line is
secret-redacted (:func:`redact_event`) and the file is 0600 in every generation. Rotation keeps one
generation at ``REFLECT_DRAIN_LOG_MAX_BYTES`` like the original (SPEC-drain §5.11), and is done
by the stdlib handler so several worker threads can log safely.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import threading
from io import TextIOWrapper
from typing import Any

import structlog
from structlog.typing import EventDict, Processor

from .config import Settings
from .perms import private_dir, private_file
from .redaction import redact, redact_value

_configured: set[str] = set()


class _PrivateRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A rotating handler whose every generation is created 0600, whatever the umask."""

    def _open(self) -> TextIOWrapper:
        private_file(self.baseFilename)
        return super()._open()


def redact_event(_logger: object, _method: str, event_dict: EventDict) -> EventDict:
    """structlog processor: secret-redact every string of a log record, its traceback too.

    A log line can quote a model's answer, a transcript path or an exception message
    holding a token; ``drain.log`` is kept for weeks. Runs after ``format_exc_info`` so the
    rendered traceback (the ``exception`` key) is redacted as well.

    Args:
        _logger: The wrapped logger (unused).
        _method: The log method's name (unused).
        event_dict: The record's fields.

    Returns:
        The record with each string value redacted.
    """
    out: dict[str, Any] = {}
    for key, value in event_dict.items():
        if isinstance(value, str):
            out[key] = redact(value)
        elif isinstance(value, dict | list | tuple):
            out[key] = redact_value(list(value) if isinstance(value, tuple) else value)[0]
        else:
            out[key] = value
    return out


_MARK = "_reflect_drain_log"
_lock = threading.Lock()


def configure_logging(settings: Settings, *, console: bool | None = None) -> None:
    """Idempotent per log path; ``console`` defaults to "stderr is a TTY".

    The first call for a log path configures structlog, attaches a rotating JSON file
    handler to the ``reflect_jobs`` and ``huey`` loggers, turns the model libraries down to
    WARNING and sets environment defaults that silence their progress bars. Later calls
    for the same path do nothing (thread-safe), so their ``console`` choice is ignored.

    Args:
        settings: Supplies ``home`` (created if missing), ``log_path`` and
            ``log_max_bytes`` (rotation size in bytes; one backup generation is kept).
        console: Also render records on stderr for a person; ``None`` means "when stderr
            is a TTY".
    """
    key = str(settings.log_path)
    with _lock:
        if key in _configured:
            return
        private_dir(settings.home)
        # Model-loading progress bars would land in drain output and JSON pipes.
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("TQDM_DISABLE", "1")
        shared: list[Processor] = [
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
        ]
        structlog.configure(
            processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
            logger_factory=structlog.stdlib.LoggerFactory(),
            wrapper_class=structlog.stdlib.BoundLogger,
            cache_logger_on_first_use=True,
        )
        root = logging.getLogger("reflect_jobs")
        root.setLevel(logging.INFO)
        root.propagate = False
        for handler in list(root.handlers):
            root.removeHandler(handler)
        # Huey's own chatter ("Executing task …") and the libraries' INFO lines belong in
        # the log file, not on a person's terminal or in a command's JSON output.
        for name in ("huey", "nano-graphrag", "sentence_transformers", "transformers"):
            lib = logging.getLogger(name)
            lib.setLevel(logging.INFO if name == "huey" else logging.WARNING)
            lib.propagate = False
        file_handler = _PrivateRotatingFileHandler(
            settings.log_path, maxBytes=settings.log_max_bytes, backupCount=1, encoding="utf-8"
        )
        file_handler.setFormatter(
            structlog.stdlib.ProcessorFormatter(
                processors=[
                    structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.format_exc_info,
                    redact_event,
                    structlog.processors.JSONRenderer(),
                ],
                foreign_pre_chain=shared,
            )
        )
        root.addHandler(file_handler)
        # The huey logger is shared by every configuration in the process: drop the handler
        # an earlier one added (another log path) instead of piling them up, so each Huey
        # line is written once, to the current drain.log.
        huey_logger = logging.getLogger("huey")
        for old in [h for h in huey_logger.handlers if getattr(h, _MARK, False)]:
            huey_logger.removeHandler(old)
            old.close()
        setattr(file_handler, _MARK, True)
        huey_logger.addHandler(file_handler)
        if console if console is not None else sys.stderr.isatty():
            tty = logging.StreamHandler(sys.stderr)
            tty.setFormatter(
                structlog.stdlib.ProcessorFormatter(
                    processors=[
                        structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                        structlog.processors.format_exc_info,
                        redact_event,
                        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
                    ],
                    foreign_pre_chain=shared,
                )
            )
            root.addHandler(tty)
        _configured.add(key)
