"""``redact_secrets``: credential-shaped strings → ``[REDACTED:<kind>]`` (SPEC-drain §10 B17).

The original sent secrets pasted into a session straight to the model and into notes. The
engine and its shapes live in :mod:`reflect_jobs.redaction` (stdlib only,
outside this package, because the hook and the logs redact with the same rules
and must not import the cascade); the cascade calls it on every turn before anything else
reads the text.
"""

from __future__ import annotations

from reflect_jobs.redaction import redact_secrets

__all__ = ["redact_secrets"]
