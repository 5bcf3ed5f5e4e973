"""The per-run token that state-changing requests must carry.

The page is served to whoever can reach 127.0.0.1, but another site open in the same browser
can still *send* a POST to it (CSRF). A random token generated when ``reflect-jobs ui``
starts, embedded in the page and required in a request header, is something such a site can
neither read (same-origin policy) nor guess; a custom header also forces a CORS preflight,
which this server never answers.
"""

from __future__ import annotations

import hmac
import secrets

#: The request header a POST must carry the token in.
HEADER = "X-Reflect-Token"


def new_token() -> str:
    """A fresh unguessable token for one run of the server.

    Returns:
        32 random bytes, URL-safe base64 (43 characters).
    """
    return secrets.token_urlsafe(32)


def token_ok(expected: str, presented: str | None) -> bool:
    """Whether a request's token is this run's, compared in constant time.

    Args:
        expected: This run's token.
        presented: The header's value (``None`` when absent).

    Returns:
        ``True`` only for an exact, non-empty match.
    """
    if not presented or not expected:
        return False
    return hmac.compare_digest(expected.encode(), presented.encode())
