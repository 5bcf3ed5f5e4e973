"""``python -m workers.run``: Huey's ``huey_consumer`` main, with a consumer log that rotates.

``huey_consumer -l FILE`` logs through a plain ``logging.FileHandler``: never rotated, it
grew at ~5 KB/s while Redis was unreachable. This is the same main (same options, same
format) with a ``RotatingFileHandler`` at ``REFLECT_DRAIN_LOG_MAX_BYTES``, one backup
generation, like ``drain.log``. ``reflect-jobs worker`` execs it.
"""

from __future__ import annotations

import logging
import logging.handlers
import signal
import sys
import time
from collections.abc import Callable

from huey.consumer import Consumer
from huey.consumer_options import ConsumerConfig, OptionParserHandler

from reflect_jobs.config import Settings

HANDLER_MARK = "_reflect_consumer_log"


def consumer_log_handler(
    config: ConsumerConfig, logfile: str | None, max_bytes: int
) -> logging.Handler:
    """The handler Huey's ``setup_logger`` would build, rotating when it writes a file.

    Args:
        config: The parsed consumer options (worker type, ``-S`` simple log).
        logfile: ``-l`` FILE, or None for stderr.
        max_bytes: Rotate the file at this size (one backup generation is kept).

    Returns:
        A formatted handler, marked so a second call replaces it instead of adding one.
    """
    worker = "%(process)d" if config.worker_type == "process" else "%(threadName)s"
    if config.simple_log:
        fmt = logging.Formatter("%(asctime)s %(message)s", "%H:%M:%S")
    else:
        fmt = logging.Formatter("[%(asctime)s] %(levelname)s:%(name)s:" + worker + ":%(message)s")
    handler: logging.Handler = (
        logging.handlers.RotatingFileHandler(logfile, maxBytes=max_bytes, backupCount=1)
        if logfile
        else logging.StreamHandler()
    )
    handler.setFormatter(fmt)
    setattr(handler, HANDLER_MARK, True)
    return handler


def install_consumer_log(config: ConsumerConfig, logfile: str | None, max_bytes: int) -> None:
    """Attach :func:`consumer_log_handler` to the ``huey`` logger, replacing an earlier one.

    Args:
        config: The parsed consumer options.
        logfile: ``-l`` FILE, or None for stderr.
        max_bytes: Rotation size.
    """
    logger = logging.getLogger("huey")
    for old in [h for h in logger.handlers if getattr(h, HANDLER_MARK, False)]:
        logger.removeHandler(old)
        old.close()
    logger.addHandler(consumer_log_handler(config, logfile, max_bytes))
    logger.setLevel(config.loglevel)


def main(argv: list[str] | None = None) -> None:
    """Parse ``huey_consumer``'s options, load the Huey instance and run its consumer.

    Args:
        argv: The options and the instance's import path (default ``sys.argv[1:]``).
    """
    from huey.bin.huey_consumer import load_huey

    from reflect_jobs.config import load_settings

    options, args = OptionParserHandler().get_option_parser().parse_args(argv)
    if not args:
        sys.stderr.write("error: missing import path to the Huey instance\n")
        raise SystemExit(2)
    opts = {k: v for k, v in options.__dict__.items() if v is not None}
    logfile = opts.pop("logfile", None)
    config = ConsumerConfig(**opts)
    config.validate()
    huey = load_huey(args[0])
    settings = load_settings()
    install_consumer_log(config, logfile, settings.log_max_bytes)
    wait_for_usable_ledger(settings)
    consumer = huey.create_consumer(**config.values)
    try:
        consumer.run()
    finally:
        hand_back_on_exit(settings, consumer)


#: The first and the longest wait between two looks at a damaged ledger.
LEDGER_RECHECK_SEC = (1.0, 60.0)


def wait_for_usable_ledger(settings: Settings, sleep: Callable[[float], None] = time.sleep) -> int:
    """Wait while the SQLite ledger is damaged, instead of starting a consumer that fails.

    A garbled ``reflect.db`` made every task, every recovery and every capture fail with a
    traceback, in a loop. Now the worker says once, in one line (stderr and the consumer
    log), which file is damaged and what fixes it, then looks again — after 1 s, doubling
    to a minute — and starts as soon as the file was restored or rebuilt
    (``reflect-jobs db rebuild``). Hooks meanwhile keep spooling captures; nothing is lost.
    SIGTERM ends the wait (the default action: there is nothing to clean up yet).

    Args:
        settings: The consumer's settings (a PostgreSQL ledger is not judged here).
        sleep: How to wait (tests pass a recorder).

    Returns:
        How many times it waited (0: the ledger was usable at once).
    """
    from reflect_jobs.ledger.db import damage_line

    delay, longest = LEDGER_RECHECK_SEC
    said, waits = None, 0
    while (line := damage_line(settings.db_url)) is not None:
        if line != said:
            said = line
            sys.stderr.write(f"reflect-jobs worker: waiting: {line}\n")
            sys.stderr.flush()
            logging.getLogger("huey.consumer").error("waiting: %s", line)
        sleep(delay)
        waits += 1
        delay = min(longest, delay * 2)
    return waits


def hand_back_on_exit(settings: Settings, consumer: Consumer) -> None:
    """After Huey's consumer returned: hand back whatever this process still holds.

    SIGTERM (``-g TERM``, what the service manager sends) is Huey's graceful stop: the tasks
    in flight finish first (the service's stop timeout is longer than a model call), so
    usually nothing is left. SIGINT, or a second SIGTERM, stops at once: the tasks' model
    children are killed and their jobs handed back, due now — not left ``running`` until a
    lease expires, and not counted as a crash (:func:`reflect_jobs.stopping.stop_now`).

    Args:
        settings: The consumer's settings.
        consumer: Huey's consumer, stopped.
    """
    from reflect_jobs import tasks
    from reflect_jobs.stopping import stop_now

    signum = getattr(consumer, "_signum", None)
    stop_now(
        settings,
        reason=f"stopping on {signal.Signals(signum).name if signum else 'exit'}",
        busy=lambda: sum(t.is_alive() for _, t in consumer.worker_threads),
        resend=tasks.HueyDispatcher().schedule,
    )


if __name__ == "__main__":
    main()
