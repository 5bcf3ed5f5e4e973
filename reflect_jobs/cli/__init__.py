"""``reflect-jobs``: operate the queue, the ledger and the KB (ARCHITECTURE §9).

Exit codes: 0 success, 1 a handled failure (doctor found problems, a job cannot be retried),
2 bad usage or bad configuration. Errors are one line on stderr. Every command that prints
data has ``--json`` with the stable shapes of ARCHITECTURE §9. Heavy modules (Huey, torch) are
imported inside the commands that need them.

This package is only the presentation layer: commands parse options, call the module that
does the work (:mod:`reflect_jobs.ledger.admin` for the ledger, :mod:`reflect_jobs.install`,
:mod:`reflect_jobs.backfill`, the index…) and print. They are grouped by what a person is
doing — :mod:`.jobs` (capture, inspect, retry), :mod:`.operations` (run), :mod:`.health` (watch),
:mod:`.knowledge` (the KB), :mod:`.setup` (install, backfill) — and share :mod:`.common`.
The console script ``reflect-jobs`` is :func:`main`.
"""

from __future__ import annotations

import os

import click

from ..perms import restrict_umask
from ..reflections.cli import main as reflections_group
from . import (
    curate,
    health,
    jobs,
    kbgit,
    knowledge,
    nightly,
    operations,
    recall,
    remove,
    settings,
    setup,
)
from .common import Main, known_failure


@click.group(cls=Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="reflect-jobs")
def main() -> None:
    """Turn coding-agent transcripts into a searchable knowledge base, in the background."""
    # Everything a command creates is private (umask 077, restored when the command ends, so
    # an in-process caller keeps its own); ``worker`` execs the consumer under it.
    previous = restrict_umask()
    click.get_current_context().call_on_close(lambda: os.umask(previous))


for _command in (
    *jobs.COMMANDS,
    *operations.COMMANDS,
    *health.COMMANDS,
    *knowledge.COMMANDS,
    *setup.COMMANDS,
    *recall.COMMANDS,
    *settings.COMMANDS,
    *remove.COMMANDS,
    *kbgit.COMMANDS,
    *curate.COMMANDS,
    *nightly.COMMANDS,
):
    main.add_command(_command)
del _command
# The reflection store's CLI, the same group as the `reflections` console script.
main.add_command(reflections_group, name="items")

__all__ = ["known_failure", "main"]
