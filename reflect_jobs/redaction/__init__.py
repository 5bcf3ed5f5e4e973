"""Secret redaction for everything we store or send: credentials → ``[REDACTED:<kind>]``.

One engine for every path a secret can take (SPEC-drain §10 B17, ARCHITECTURE §11):

* the cascade redacts transcript turns before the model sees them (:func:`redact_secrets`);
* the write stage redacts the model's answer the moment it returns, before it is recorded
  or parsed (:func:`redact_structured`, which keeps a JSON answer valid JSON), so notes,
  sidecars, note ids (file names), the ledger and later prompts never see a secret;
* ``drain.log`` and ``hook-errors.log`` redact every line (:func:`redact`).

Stdlib only, and outside the cascade package, because the hook imports it. The shapes are
in :mod:`.rules`, the validators in :mod:`.checks`, the scans in :mod:`.engine`.
"""

from reflect_jobs.redaction.checks import entropy, is_placeholder
from reflect_jobs.redaction.engine import redact, redact_secrets, tag
from reflect_jobs.redaction.structured import redact_structured, redact_value

__all__ = [
    "entropy",
    "is_placeholder",
    "redact",
    "redact_secrets",
    "redact_structured",
    "redact_value",
    "tag",
]
