"""reflect-jobs: durable background workers that turn agent transcripts into learnings.

This package's ``__init__`` is deliberately empty of imports: the hook entry point
(`reflect_jobs.hook`) must start in a few milliseconds, so importing the package must not
pull in SQLAlchemy, Huey, structlog or click.
"""

__version__ = "0.3.0"
