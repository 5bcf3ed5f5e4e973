"""The ``reflect-jobs`` console script: a tiny dispatcher in front of the click CLI.

``reflect-jobs statusline`` runs after every message of a Claude Code session, so it must
cost about an interpreter start-up: it is served here by :mod:`reflect_jobs.statusline`
(standard library only) without importing click or the package's CLI. Every other command
goes to :func:`reflect_jobs.cli.main` as before.
"""

from __future__ import annotations

import sys


def main() -> int | None:
    """Run ``statusline`` without the CLI, anything else through it.

    Returns:
        The exit code (click's ``main`` exits by itself).
    """
    if sys.argv[1:2] == ["statusline"]:
        from reflect_jobs.statusline import main as statusline

        return statusline(sys.argv[2:])
    from reflect_jobs.cli import main as cli

    return cli()


if __name__ == "__main__":
    sys.exit(main())
