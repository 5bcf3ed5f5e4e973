"""The credential shapes ``reflect_jobs.redaction`` looks for: data, no logic (stdlib only).

Three tables, one per pass of the engine, each written so the pass is ONE regex scan of the
text (60+ shapes as 60 scans would be 60 times the work on a multi-MB transcript):

* :data:`TOKEN_RULES`: self-identifying tokens (a vendor prefix such as ``ghp_`` or
  ``AKIA``, a PEM header, ``://user:pw@``) and command contexts (``curl -u``, ``mysql -p``).
  Every pattern must begin with a literal character (no class, group or assertion first):
  the engine joins them with ``|`` and the ``re`` module then skips every position whose
  character cannot start any of them. A leading ``\\b`` is expressed as ``lead=True``
  (checked in Python on the rare match) for the same reason.
* :data:`SECRET_NAMES`: the names whose value is a secret (``password``, ``token``, ``_auth``,
  ``client-key-data``…), in every casing a name is written in, for ``NAME=value``,
  ``"name": "value"``, ``--name value`` and "the token is X" phrasing.
* :data:`VENDOR_WORDS`: vendors whose keys have no prefix (an AWS secret key, a Datadog,
  Heroku or Twilio key): a key of the vendor's shape within a short window after the
  vendor's name.

The shapes are the vendors' documented token formats, the same ones the public rule lists of
gitleaks and detect-secrets describe; the patterns and the engine are our own. We prefer over-redaction: a learning loses nothing from
``[REDACTED:password]``; a leaked key is leaked forever.
"""

from __future__ import annotations

from dataclasses import dataclass

B64 = r"[A-Za-z0-9+/]"
URLSAFE = r"[A-Za-z0-9_-]"
HEX = r"[0-9a-f]"


@dataclass(frozen=True)
class TokenRule:
    """One self-identifying shape.

    Attributes:
        kind: The ``<kind>`` of ``[REDACTED:<kind>]``.
        pattern: A regex that begins with a literal character and has no backreference.
        group: The group that is the secret (0: the whole match); the rest is kept, e.g.
            the user name of ``curl -u user:pw``.
        lead: The character before the match must not be a letter, digit or ``_`` (a
            leading word boundary, checked on the match only).
        check: The name of a validator in ``checks.CHECKS`` the secret must pass
            (``""``: none), for shapes whose literal part is not distinctive enough alone.
    """

    kind: str
    pattern: str
    group: int = 0
    lead: bool = True
    check: str = ""


TOKEN_RULES: tuple[TokenRule, ...] = (
    TokenRule(
        "private_key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
        r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
        lead=False,
    ),
    TokenRule("private_key", r"PuTTY-User-Key-File-\d: [\s\S]*?(?:Private-MAC: \w+|\Z)"),
    # base64 of "-----BEGIN ... PRIVATE KEY" (kube client-key-data, k8s secrets, env vars)
    TokenRule(
        "private_key",
        r"LS0tLS1CRUdJTi(?:BQUklWQVRF|BSU0Eg|BFQyBQ|BPUEVOU1NI|BEU0Eg|BFTkNSWVBURUQg)[A-Za-z0-9+/=]{16,}",
    ),
    TokenRule("age_secret_key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    TokenRule(
        "aws_access_key",
        r"A(?:KIA|SIA|GPA|IDA|ROA|IPA|NPA|NVA|3T[A-Z0-9])[A-Z0-9]{16}\b",
    ),
    TokenRule("aws_session_token", r"(?:FwoGZXIvYXdz|IQoJb3JpZ2luX2Vj)[A-Za-z0-9/+=]{40,}"),
    TokenRule("github_token", r"gh[pousr]_[A-Za-z0-9]{30,}\b"),
    TokenRule("github_token", r"github_pat_[A-Za-z0-9_]{22,}\b"),
    TokenRule("gitlab_token", r"gl(?:pat|ptt|dt|rt|soat|cbt|imt|agent)-[A-Za-z0-9_-]{20,}"),
    TokenRule(
        "slack_webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+",
        lead=False,
    ),
    TokenRule(
        "discord_webhook",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]+",
        lead=False,
    ),
    TokenRule("slack_token", r"xox[abposre]-[A-Za-z0-9-]{10,}"),
    TokenRule("slack_token", r"xapp-\d-[A-Za-z0-9-]{10,}"),
    TokenRule("stripe_key", r"sk_(?:live|test)_[A-Za-z0-9]{16,}\b"),
    TokenRule("stripe_key", r"rk_(?:live|test)_[A-Za-z0-9]{16,}\b"),
    TokenRule("stripe_key", r"pk_(?:live|test)_[A-Za-z0-9]{16,}\b"),
    TokenRule("stripe_key", r"whsec_[A-Za-z0-9]{20,}\b"),
    TokenRule("anthropic_key", r"sk-ant-[A-Za-z0-9_-]{20,}"),
    TokenRule("openai_key", r"sk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_-]{20,}"),
    TokenRule("groq_key", r"gsk_[A-Za-z0-9]{40,}\b"),
    TokenRule("xai_key", r"xai-[A-Za-z0-9]{40,}\b"),
    TokenRule("perplexity_key", r"pplx-[A-Za-z0-9]{40,}\b"),
    TokenRule("replicate_token", r"r8_[A-Za-z0-9]{30,}\b"),
    TokenRule("google_api_key", r"AIza[0-9A-Za-z_-]{35}"),
    TokenRule("google_oauth", r"ya29\.[0-9A-Za-z_-]{20,}"),
    TokenRule("google_oauth", r"GOCSPX-[0-9A-Za-z_-]{20,}"),
    TokenRule("jwt", r"eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    TokenRule("npm_token", r"npm_[A-Za-z0-9]{36}\b"),
    TokenRule("pypi_token", r"pypi-[A-Za-z0-9_-]{50,}"),
    TokenRule("huggingface_token", r"hf_[A-Za-z0-9]{30,}\b"),
    TokenRule("sendgrid_key", r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    TokenRule("twilio_key", r"SK[0-9a-fA-F]{32}\b"),
    TokenRule("twilio_key", r"AC[0-9a-fA-F]{32}\b"),
    TokenRule("mailgun_key", r"key-[0-9a-f]{32}\b"),
    TokenRule("digitalocean_token", r"do[opr]_v1_[a-f0-9]{64}\b"),
    TokenRule("shopify_token", r"shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}\b"),
    TokenRule("databricks_token", r"dapi[a-f0-9]{32}(?:-\d)?\b"),
    TokenRule("heroku_key", r"HRKU-[A-Za-z0-9_-]{40,}"),
    TokenRule("vault_token", r"hv[sbr]\.[A-Za-z0-9_-]{24,}"),
    TokenRule("grafana_token", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b"),
    TokenRule("grafana_token", r"glc_[A-Za-z0-9+/]{32,}={0,2}"),
    TokenRule("newrelic_key", r"NRAK-[A-Z0-9]{27}\b"),
    TokenRule("sentry_token", r"sntry[su]_[A-Za-z0-9+/=_-]{40,}"),
    TokenRule("linear_key", r"lin_api_[A-Za-z0-9]{40}\b"),
    TokenRule("postman_key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}\b"),
    TokenRule("doppler_token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}"),
    TokenRule("atlassian_token", r"ATATT3[A-Za-z0-9_=-]{100,}"),
    TokenRule("docker_pat", r"dckr_pat_[A-Za-z0-9_-]{27,}"),
    TokenRule("sonarqube_token", r"sq[pua]_[a-f0-9]{40}\b"),
    TokenRule("supabase_token", r"sbp_[a-f0-9]{40}\b"),
    TokenRule("planetscale_token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,}"),
    TokenRule("notion_token", r"ntn_[A-Za-z0-9]{40,}\b"),
    TokenRule("figma_token", r"figd_[A-Za-z0-9_-]{40,}"),
    TokenRule("square_token", r"sq0(?:atp|csp)-[A-Za-z0-9_-]{22,}"),
    TokenRule("square_token", r"EAAA[A-Za-z0-9_-]{60}\b"),
    TokenRule("facebook_token", r"EAACEdEose0cBA[A-Za-z0-9]{20,}"),
    TokenRule("alibaba_key", r"LTAI[A-Za-z0-9]{20}\b"),
    TokenRule("terraform_token", r"atlasv1\.[A-Za-z0-9_=-]{60,}", lead=False),
    # Discord bot token: base64 user id . timestamp . HMAC (the id starts M, N or O).
    TokenRule("discord_token", r"M[A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}"),
    TokenRule("discord_token", r"N[A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}"),
    TokenRule("discord_token", r"O[A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,40}"),
    TokenRule("sas_signature", r"sig=([A-Za-z0-9%/+=]{20,})", group=1, lead=False, check="sas"),
    TokenRule("bearer_token", r"Bearer\s+([A-Za-z0-9._~+/-]{16,}=*)", group=1, check="entropy"),
    TokenRule("bearer_token", r"bearer\s+([A-Za-z0-9._~+/-]{16,}=*)", group=1, check="entropy"),
    TokenRule("bearer_token", r"BEARER\s+([A-Za-z0-9._~+/-]{16,}=*)", group=1, check="entropy"),
    TokenRule("basic_auth", r"Basic\s+([A-Za-z0-9+/]{12,}=*)", group=1, check="base64"),
    # Django REST framework / Rails: "Authorization: Token <key>"
    TokenRule(
        "auth_token",
        r"Authorization:\s*Token\s+([A-Za-z0-9._~+/=-]{16,})",
        group=1,
        check="entropy",
    ),
    TokenRule(
        "auth_token",
        r"authorization:\s*[Tt]oken\s+([A-Za-z0-9._~+/=-]{16,})",
        group=1,
        check="entropy",
    ),
    # Session cookies: a logged-in session, as good as a password while it lives.
    TokenRule("session_cookie", r"sessionid=([A-Za-z0-9%._~+/-]{16,})", group=1, check="entropy"),
    TokenRule("session_cookie", r"PHPSESSID=([A-Za-z0-9%._~+/-]{16,})", group=1, check="entropy"),
    TokenRule("session_cookie", r"JSESSIONID=([A-Za-z0-9%._~+/-]{16,})", group=1, check="entropy"),
    TokenRule(
        "session_cookie", r"connect\.sid=([A-Za-z0-9%._~+/-]{16,})", group=1, check="entropy"
    ),
    TokenRule("basic_auth", r"basic\s+([A-Za-z0-9+/]{12,}=*)", group=1, check="base64"),
    # scheme://user:password@host, also with no user (redis://:pw@host); the user is kept.
    TokenRule(
        "url_password", r"://[^\s:/@'\"]*:([^\s@/'\"]+)@", group=1, lead=False, check="value"
    ),
)

#: Command lines whose secret follows a flag, possibly far from the command name. A pass of
#: their own, after :data:`TOKEN_RULES`: a match spans the whole command up to the secret, and
#: any token in that span (``curl -H "Authorization: Bearer …" -u u:pw``) must already be gone.
#: Only run when one of :data:`CONTEXT_WORDS` is in the text.
CONTEXT_RULES: tuple[TokenRule, ...] = (
    # curl -u user:pw / --user user:pw (the user is kept)
    TokenRule(
        "password",
        r"curl\b[^\n|;&]*?\s(?:-u\s*|--user[= ]\s*)['\"]?[^\s:'\"]*:([^\s'\"]+)",
        group=1,
        check="value",
    ),
    # mysql -pPASSWORD (no space: with a space the client prompts); -P is the port.
    TokenRule(
        "password",
        r"mysql(?:dump|admin|sh|import|check)?\b[^\n|;&]*?\s-p([^\s'\"]+)",
        group=1,
        check="value",
    ),
    TokenRule(
        "password",
        r"mariadb(?:-dump|-admin)?\b[^\n|;&]*?\s-p([^\s'\"]+)",
        group=1,
        check="value",
    ),
    TokenRule("password", r"sshpass\s+-p\s*['\"]?([^\s'\"]+)", group=1, check="value"),
    # docker login -u USER -p PASSWORD (--password-stdin is the safe form and is kept)
    TokenRule(
        "password",
        r"docker\s+login\b[^\n|;&]*?\s(?:-p|--password)[= ]\s*['\"]?([^\s'\"]+)",
        group=1,
        check="value",
    ),
    # az login --service-principal -u APP -p SECRET (Azure AD client secret as a flag)
    TokenRule(
        "azure_secret",
        r"az\s+login\b[^\n|;&]*?\s(?:-p|--password)[= ]\s*['\"]?([^\s'\"]+)",
        group=1,
        check="value",
    ),
)
CONTEXT_WORDS = ("curl", "mysql", "mariadb", "sshpass", "az ", "docker")

#: Azure AD client secrets (``abc8Q~…``) start with a class, so they get a pass of their own.
AZURE_CLIENT_SECRET = (
    r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])"
)
#: Telegram bot tokens: ``<bot id>:AA<33 chars>``.
TELEGRAM_BOT_TOKEN = r"(?<![0-9])[0-9]{8,10}:AA[A-Za-z0-9_-]{30,36}(?![A-Za-z0-9_-])"

# Secret names, as words joined by an optional separator; each is expanded into the casings
# names are written in (password, PASSWORD, Password, and camelCase for two-word names).
# ``pass`` words give the kind "password", the others "secret".
SECRET_NAMES: tuple[tuple[str, ...], ...] = (
    ("password",),
    ("passwd",),
    ("passphrase",),
    ("pwd",),
    ("secret",),
    ("token",),
    ("api", "key"),
    ("access", "key"),
    ("private", "key"),
    ("account", "key"),
    ("shared", "access", "key"),
    ("signing", "key"),
    ("encryption", "key"),
    ("master", "key"),
    ("license", "key"),
    ("key", "data"),
    ("credential",),
    ("connection", "string"),
    ("_auth",),
    ("auth",),
    ("sas",),
    ("key",),
)
#: Names that only count as the whole name (``"auth": …``, ``_auth=``, ``sas=``), not as a
#: part of a longer one (``auth_method``, ``oauth``, ``sasl``).
EXACT_NAMES = frozenset({"auth", "_auth", "sas", "pwd"})
#: Names too common to trust alone (``key: name``): their value counts only when it looks
#: machine-made (long, mixed, high entropy), as in ``WEATHER_KEY=f3a9c2e7…``.
WEAK_NAMES = frozenset({"key"})

#: Vendor names whose keys have no prefix, and the shape of their key (a validator name).
VENDOR_WORDS: dict[str, str] = {
    "aws": "aws_secret",
    "datadog": "hex32_40",
    "dd_api_key": "hex32_40",
    "dd_app_key": "hex32_40",
    "dd-api-key": "hex32_40",
    "dd-application-key": "hex32_40",
    "heroku": "uuid",
    "twilio": "hex32",
    "mailchimp": "hex32_dc",
    "snyk": "uuid",
    "okta": "okta",
    "cloudflare": "cloudflare",
    "azure_devops": "azdo",
    "azure-devops": "azdo",
    "ado_pat": "azdo",
}
