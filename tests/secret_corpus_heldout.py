"""A held-out credential corpus for issue 21: shapes and look-alikes the engine was not tuned on.

Kept apart from :mod:`secret_corpus` (which the redaction rules were written against) so that
it measures the engine rather than restating it. Every value is fake (random bytes, made-up
hosts). Same entry format: ``(name, secret, template, lookalike)``; ``template.format(secret)``
is the text as a person pastes it or a model echoes it, ``secret`` the part that must not
survive, ``lookalike`` a text that is NOT a secret and must come out of redaction unchanged.

The credentials lean on what the first corpus lacked: PEM blocks whose newlines are escaped
``\\n`` inside a JSON string (a service-account file pasted whole; a raw transcript line; a
model echoing it into its JSON answer), Django ``SECRET_KEY`` values (``a-z0-9!@#$%^&*(-_=+)``,
which may start with ``$``, ``%`` or ``(``), ``export``/``.env``/YAML lines, connection strings,
headers and JSON fields named for a credential. For PEM blocks ``secret`` is the LAST body line,
so a redaction that stops at the first (escaped) newline still leaks.

The look-alikes take the forms the false positives take in real transcripts
(``tests/data/transcripts/fp-corpus``): JSON fields whose names hold key/token/secret/auth as a
sub-word with prose values (``"key_insight"``, ``"monkey"``, ``"token_count"``), markdown
headings ("**Key Findings:**"), prose about credentials, code that reads a credential from
somewhere else, and placeholders. A look-alike that parses as a JSON object is also merged into
an echoed answer's learning as fields (see ``bench/redaction_probe.py``).

:data:`CLEAN_ANSWER` is a model answer with every field a note, sidecar, ledger and context
block keep, and no credential anywhere: redaction must return it verbatim.
"""

from __future__ import annotations

# Fake key material (random base64, 64 chars a line, as PEM writes it).
_B = [
    "VNbWkPVu8114AQe92yNKdncV39DiEaj+O7wLTy0/CuhSr834TV8T8HgmZWokPvPG",
    "Zq5K0ZW658Wi+MWIDS9R/QH7I3GjOVxXsqqxnH00ViFZ279REnvQUwex+8B+fVMj",
    "4ND3HZMahJQR1n9XySOtSk31GYFH9Q5su0682vj0nUeNRwXDQAyHpn/Xg89GREgw",
    "yzBfDORIJDyQQJumyvxwVVxewWcXHQTG7SDLWXeBoBV9x0+el/oyHqWelWEgpme1",
    "IaLXNyYl5Qri8cfNJHMMGN4Vfo3P2ul5zMWn+XQrE/VY+75u5oZ99v/FnMMDUqBn",
    "n8hKLlkomsDsN1Xdaau+YIUpDqSCTmZ6jsJQye/N3+uPWcSLMmBuEbO8CSYUy+Hm",
    "egNLMJ5h6L0BvVVF3RmeYNXOfXPvCSUp32BNHv778a1Oik60k5gEJCJfMmG4irQe",
    "UhP9jMxQEDV3t4DRZWPYKKZwbRS0WQq8/PRS4gmPHG85nsdr7bsFtFiHDMBSXdNp",
    "c5LmuSp6z1u0uUMN2A1rNmy9lz5Setnt/WFsgV7cwXH69IcU6mkSrOGaR3BRwEjJ",
    "EAGX6mT4dPccDb1D/6rstcflJIM1v4DqP2WqJ51/QkqHNZdvaUT+/W8Qq7wEYkiR",
    "HYbTHj8Kd+P5v90Ku0mxzePpcuB3CuhxLLD6T1QGiqeomW4Y6V9nTQVQTnE5VTvP",
    "Pj9oagkrfHAxfWjdBMyaorfVEf8XzvZdEyiD8YZTlK69+4fHlhs7ky75pkZMn53H",
]
_OPENSSH_HEAD = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAABlwAAAAdzc2gtcn"


def _pem(label: str, first: str, body: list[str], nl: str) -> str:
    """A PEM block whose lines are joined by ``nl`` (a newline, or an escaped ``\\n``)."""
    lines = [f"-----BEGIN {label}-----", first, *body, f"-----END {label}-----"]
    return nl.join(lines)


_ESC = "\\n"  # a backslash and an n: the newline as it stands inside a JSON string

PEM_RSA_ESC = _pem("RSA PRIVATE KEY", "MIIEpQIBAAKCAQEAx3Y" + _B[0][19:], _B[1:4], _ESC)
PEM_EC_ESC = _pem("EC PRIVATE KEY", "MHcCAQEEIB" + _B[4][10:], _B[5:6], _ESC)
PEM_OPENSSH_ESC = _pem("OPENSSH PRIVATE KEY", _OPENSSH_HEAD, _B[6:9], _ESC)
PEM_PKCS8_ESC = _pem(
    "PRIVATE KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + _B[9][32:], _B[10:12], _ESC
)
PEM_ENC_ESC = _pem(
    "ENCRYPTED PRIVATE KEY", "MIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkq" + _B[2][32:], _B[3:5], _ESC
)
PEM_DSA_ESC = _pem("DSA PRIVATE KEY", "MIIBuwIBAAKBgQD" + _B[5][15:], _B[6:8], _ESC)
PEM_RSA_NL = _pem("RSA PRIVATE KEY", "MIIEowIBAAKCAQEAu1" + _B[8][18:], _B[9:11], "\n")
PEM_OPENSSH_NL = _pem("OPENSSH PRIVATE KEY", _OPENSSH_HEAD, _B[0:2], "\n")

DJANGO_DOLLAR = "$wi7w^%wn%kfrkavckw(n6bcblu!*9oiu$-k#+mgl_t0qun_zy"
DJANGO_PERCENT = "%s=_cptuot1)mf$33-(ll_$2dy5f-95k9h$a_)bt7j_%a%e2f!"
DJANGO_PAREN = "(0x#z25=ql!t%+otejk0^u9q)wz8=hx86df^mp3v4s6p&94r)m"
DJANGO_PLAIN = "x*!uu$@=480+o%qn&l87kg_lq+41#8rp6qf#^%hs!en8k(a6)9"
DJANGO_INSECURE = "django-insecure-k6%p%1(0**zq$(l1ma-sy0m&&q_%&z5s@_od&xqxv716dq*kol"


def _case(name: str, text: str, secret: str, lookalike: str) -> tuple[str, str, str, str]:
    """One entry, written as the full text: the template is the text with the secret cut out."""
    if text.count(secret) != 1:
        raise ValueError(f"{name}: the secret must occur exactly once in its text")
    template = text.replace("{", "{{").replace("}", "}}").replace(secret, "{}")
    return name, secret, template, lookalike


def _last_body_line(pem: str) -> str:
    nl = "\\n" if "\\n" in pem else "\n"
    return pem.split(nl)[-2]


SECRETS_HELDOUT: list[tuple[str, str, str, str]] = [
    # --- PEM blocks with escaped newlines inside JSON strings --------------------------------
    _case(
        "pem_rsa_json_escaped",
        '{"type": "service_account", "private_key": "' + PEM_RSA_ESC + '\\n"}',
        _last_body_line(PEM_RSA_ESC),
        '{"key_insight": "Use pnpm install from the repository root; npm rewrites the lockfile"}',
    ),
    _case(
        "pem_ec_env_escaped",
        'EC_SIGNING_KEY="' + PEM_EC_ESC + '"',
        _last_body_line(PEM_EC_ESC),
        '{"monkey": "patch the HTTP client in conftest.py, not in each test"}',
    ),
    _case(
        "pem_openssh_json_escaped",
        '{"deploy": {"ssh_key": "' + PEM_OPENSSH_ESC + '\\n", "host": "203.0.113.7"}}',
        _last_body_line(PEM_OPENSSH_ESC),
        '{"keyboard_layout": "us-intl", "editor": "vim"}',
    ),
    _case(
        "pem_pkcs8_gcp_escaped",
        '{"project_id": "demo-123", "private_key_id": "", "private_key": "'
        + PEM_PKCS8_ESC
        + '\\n", "client_email": "ci@demo-123.iam.gserviceaccount.com"}',
        _last_body_line(PEM_PKCS8_ESC),
        '{"token_count": 1200, "input_tokens": 980, "output_tokens": 220}',
    ),
    _case(
        "pem_encrypted_escaped",
        'tls:\n  key: "' + PEM_ENC_ESC + '"',
        _last_body_line(PEM_ENC_ESC),
        '{"auth_method": "oauth", "auth_provider": "github"}',
    ),
    _case(
        "pem_dsa_escaped",
        "paste this into the secret store: " + PEM_DSA_ESC,
        _last_body_line(PEM_DSA_ESC),
        '{"secret_santa": "draw names on Friday after standup"}',
    ),
    _case(
        "pem_rsa_double_escaped",
        '"{\\"private_key\\": \\"' + PEM_RSA_ESC.replace("\\n", "\\\\n") + '\\\\n\\"}"',
        _last_body_line(PEM_RSA_ESC),
        '{"key_findings": ["the cache key ignores the locale", "retries double the load"]}',
    ),
    _case(
        "pem_rsa_escaped_unterminated",
        '{"private_key": "' + PEM_RSA_ESC.rsplit("\\n", 1)[0] + "\\n",
        _last_body_line(PEM_RSA_ESC),
        '{"primary_key": "user_id", "sort_key": "created_at"}',
    ),
    _case(
        "pem_rsa_pasted_in_prose",
        "the deploy key is below, rotate it after the release:\n" + PEM_RSA_NL + "\nthanks",
        _last_body_line(PEM_RSA_NL),
        "**Key Findings:**\n- the retry loop never backs off\n- the pool is too small",
    ),
    _case(
        "pem_openssh_yaml_block",
        "deploy_key: |\n  " + PEM_OPENSSH_NL.replace("\n", "\n  "),
        _last_body_line(PEM_OPENSSH_NL),
        "**Key Responsibilities:**\n- Installation management (`install()`, `uninstall()`)",
    ),
    # --- Django secret keys, .env and export lines -------------------------------------------
    _case(
        "django_secret_key_dollar",
        f"SECRET_KEY={DJANGO_DOLLAR}",
        DJANGO_DOLLAR,
        "SECRET_KEY=${DJANGO_SECRET_KEY}",
    ),
    _case(
        "django_secret_key_percent",
        f"DJANGO_SECRET_KEY={DJANGO_PERCENT}",
        DJANGO_PERCENT,
        "DJANGO_SECRET_KEY=<generate with get_random_secret_key()>",
    ),
    _case(
        "django_secret_key_paren_quoted",
        f"DJANGO_SECRET_KEY='{DJANGO_PAREN}'",
        DJANGO_PAREN,
        "The SECRET_KEY is read from the environment in settings/prod.py, never committed.",
    ),
    _case(
        "django_settings_py",
        f'SECRET_KEY = "{DJANGO_PLAIN}"',
        DJANGO_PLAIN,
        'SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]',
    ),
    _case(
        "django_insecure_startproject",
        f"# SECURITY WARNING: keep the secret key used in production secret!\n"
        f"SECRET_KEY = '{DJANGO_INSECURE}'",
        DJANGO_INSECURE,
        "# SECURITY WARNING: keep the secret key used in production secret!",
    ),
    _case(
        "env_secret_key_in_dotenv",
        f"DEBUG=0\nALLOWED_HOSTS=app.example.com\nSECRET_KEY={DJANGO_PERCENT[::-1]}\n",
        DJANGO_PERCENT[::-1],
        "Key insight: the cache key must include the locale, or French users get English pages.",
    ),
    _case(
        "export_db_password",
        'export DATABASE_PASSWORD="Wq8#zL2!vR5p"',
        "Wq8#zL2!vR5p",
        'password = os.environ["DB_PASSWORD"]',
    ),
    _case(
        "export_jwt_secret",
        "export JWT_SECRET=3a755a211f55cc9e1545ce5cca36533a13cacf82",
        "3a755a211f55cc9e1545ce5cca36533a13cacf82",
        "token = get_token()",
    ),
    _case(
        "dotenv_session_secret",
        "SESSION_SECRET=or0nbkPUmdvMzMSVmKh7zs1f",
        "or0nbkPUmdvMzMSVmKh7zs1f",
        "api_key=settings.API_KEY",
    ),
    _case(
        "dotenv_flask_secret_key",
        "FLASK_SECRET_KEY=6r4W6cSW12p6FZyBwdxEVPrbbI5ic9FJ8Lyu8TDT",
        "6r4W6cSW12p6FZyBwdxEVPrbbI5ic9FJ8Lyu8TDT",
        "export API_KEY=your_api_key_here",
    ),
    # --- YAML --------------------------------------------------------------------------------
    _case(
        "yaml_password",
        "database:\n  user: app\n  password: Zt7#mQ2&xL9v\n  host: db",
        "Zt7#mQ2&xL9v",
        "database:\n  user: app\n  password: ${DB_PASSWORD}\n  host: db",
    ),
    _case(
        "yaml_db_password_quoted",
        'db_password: "C&xF!kWvjTt5L8"',
        "C&xF!kWvjTt5L8",
        "password_policy: at least 12 characters, rotated every 90 days",
    ),
    _case(
        "yaml_k8s_string_data",
        "stringData:\n  api-key: L2r0ORdqVutlUci9M5kKc0qG",
        "L2r0ORdqVutlUci9M5kKc0qG",
        "secret_manager: AWS Secrets Manager holds the database credentials",
    ),
    # --- connection strings ------------------------------------------------------------------
    _case(
        "mongodb_srv",
        "MONGO_URI=mongodb+srv://app:XOkzWNC*hPVMPc@cluster0.ab1cd.mongodb.net/prod",
        "XOkzWNC*hPVMPc",
        "MONGO_URI=mongodb+srv://cluster0.ab1cd.mongodb.net/prod",
    ),
    _case(
        "amqp_url",
        "CELERY_BROKER_URL=amqp://worker:waXM5ovjdAE3jY@rabbit:5672/vhost",
        "waXM5ovjdAE3jY",
        "CELERY_BROKER_URL=amqp://rabbit:5672/vhost",
    ),
    _case(
        "mysql_url",
        'engine = create_engine("mysql+pymysql://root:uAj4ck!0er93zr@localhost:3306/app")',
        "uAj4ck!0er93zr",
        'engine = create_engine(settings.DATABASE_URL)  # "mysql+pymysql://…" comes from .env',
    ),
    _case(
        "jdbc_password_param",
        "jdbc:postgresql://db:5432/app?user=app&password=ahSqzN8mMw0TYi&ssl=true",
        "ahSqzN8mMw0TYi",
        "jdbc:postgresql://db:5432/app?user=app&ssl=true",
    ),
    _case(
        "ado_net_connection",
        "Data Source=sql01;Initial Catalog=Orders;User Id=svc_orders;Password=H51Nf3CgqN96jL;",
        "H51Nf3CgqN96jL",
        "Data Source=sql01;Initial Catalog=Orders;Integrated Security=True;",
    ),
    _case(
        "smtp_url",
        "EMAIL_URL=smtps://mailer:yNHoYbfqBSOYfYHw@smtp.example.com:465",
        "yNHoYbfqBSOYfYHw",
        "The password reset email is sent by the worker, not by the web process.",
    ),
    _case(
        "git_x_access_token",
        "git remote set-url origin https://x-access-token:V2vpIQvnakZETPOOz8Lk@github.com/o/r.git",
        "V2vpIQvnakZETPOOz8Lk",
        "git remote set-url origin git@github.com:o/r.git",
    ),
    # --- headers -----------------------------------------------------------------------------
    _case(
        "authorization_token_drf",
        "Authorization: Token 9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
        "9944b09199c62bcf9418ad846dd0e4bbdfc6ee4b",
        "Authorization: Token <your-token>",
    ),
    _case(
        "json_headers_bearer",
        '{"headers": {"Authorization": "Bearer O1mm8x2Eud3jiPwsAQ9rtxyx"}, "timeout": 10}',
        "O1mm8x2Eud3jiPwsAQ9rtxyx",
        '{"headers": {"Authorization": "Bearer ${API_TOKEN}"}, "timeout": 10}',
    ),
    _case(
        "x_api_key_header",
        '-H "X-API-Key: qOIK1AoPMuvjJaVMdKcZDkFRBD2Hj19H"',
        "qOIK1AoPMuvjJaVMdKcZDkFRBD2Hj19H",
        '{"api_key_header": "X-API-Key", "rate_limit": 100}',
    ),
    _case(
        "cookie_sessionid",
        "Cookie: csrftoken=abc; sessionid=k2v9x8q1w3e4r5t6y7u8i9o0p1a2s3d4",
        "k2v9x8q1w3e4r5t6y7u8i9o0p1a2s3d4",
        "Cookie: theme=dark; lang=fr",
    ),
    # --- JSON fields named for a credential --------------------------------------------------
    _case(
        "json_client_secret",
        '{"client_id": "web-app", "client_secret": "IcvEh8JGBuqB7hs5bqptE0RlevvDUOwC"}',
        "IcvEh8JGBuqB7hs5bqptE0RlevvDUOwC",
        '{"client_id": "web-app", "client_secret": "YOUR_CLIENT_SECRET"}',
    ),
    _case(
        "json_api_key",
        '{"provider": "weather", "api_key": "d7dca6ab99e02823ffadac7824526bccf342cf6d"}',
        "d7dca6ab99e02823ffadac7824526bccf342cf6d",
        '{"provider": "weather", "api_key": "sk-..."}',
    ),
    _case(
        "json_private_key_hex",
        '{"network": "sepolia", "private_key": '
        '"0x3a755a211f55cc9e1545ce5cca36533a13cacf82c184bf2a3ecdef91d7187f88"}',
        "0x3a755a211f55cc9e1545ce5cca36533a13cacf82c184bf2a3ecdef91d7187f88",
        "The private key never leaves the HSM; sign through the KMS API.",
    ),
    _case(
        "json_token",
        '{"user": "ci", "token": "b8Kq2ZpL9xWv4RtN7mCj3HsF6dYg1QeA"}',
        "b8Kq2ZpL9xWv4RtN7mCj3HsF6dYg1QeA",
        '{"token_type": "Bearer", "expires_in": 3600}',
    ),
    _case(
        "json_access_refresh_token",
        '{"access_token": "short", "refresh_token": "1//0gLx7RkA2vQeTCgYIARAAGBASNwF-L9Ir"}',
        "1//0gLx7RkA2vQeTCgYIARAAGBASNwF-L9Ir",
        "Rotate the token before it expires; the refresh job runs hourly.",
    ),
    _case(
        "json_secret",
        '{"webhook": {"url": "https://ci.example.com/hook", "secret": "Mh2#p9LqV!x7Rt"}}',
        "Mh2#p9LqV!x7Rt",
        "Store the secret in Vault and mount it at /run/secrets, never in the image.",
    ),
    _case(
        "json_password_special",
        '{"username": "admin", "password": "P@ssw0rd!2024#prod"}',
        "P@ssw0rd!2024#prod",
        '{"username": "admin", "password": "<redacted>"}',
    ),
    _case(
        "js_apikey_camel",
        'const client = new Client({ apiKey: "Xk9fQ2mLp7RtV4wZ8bNc3Hj6" });',
        "Xk9fQ2mLp7RtV4wZ8bNc3Hj6",
        "const client = new Client({ apiKey: process.env.CLIENT_API_KEY });",
    ),
    _case(
        "json_auth_token",
        '{"auth_token": "e72f0c3b9d5a41f6a8b2c7d0e93f1a6499bd"}',
        "e72f0c3b9d5a41f6a8b2c7d0e93f1a6499bd",
        '{"auth_flow": "device code, then refresh on 401"}',
    ),
    _case(
        "json_credentials_object",
        '{"credentials": {"username": "svc", "password": "Tq4!zWm8#Lr2"}}',
        "Tq4!zWm8#Lr2",
        '{"credentials_file": "~/.aws/credentials", "profile": "staging"}',
    ),
    # --- code and config files ---------------------------------------------------------------
    _case(
        "python_password_literal",
        'conn = psycopg.connect(host="db", user="app", password="Gk3!vZq9#Tw2")',
        "Gk3!vZq9#Tw2",
        'conn = psycopg.connect(host="db", user="app", password=os.environ["PGPASSWORD"])',
    ),
    _case(
        "python_typed_constant",
        'API_TOKEN: str = "7fQ2mZp9LxR4tV8wKb3N"',
        "7fQ2mZp9LxR4tV8wKb3N",
        "API_TOKEN: str = Field(..., description='read from the environment')",
    ),
    _case(
        "netrc",
        "machine api.example.com login deploy password N3tRcS3cr3tV4lue",
        "N3tRcS3cr3tV4lue",
        "machine api.example.com login deploy  # password comes from the keychain",
    ),
    _case(
        "aws_configure_set",
        "aws configure set aws_secret_access_key Qm3Zr8XtLp2Vb7Nc4Hw9Ks1Fd6Jg0Ty5Ru/Ae+Bo",
        "Qm3Zr8XtLp2Vb7Nc4Hw9Ks1Fd6Jg0Ty5Ru/Ae+Bo",
        "aws configure set region eu-west-1",
    ),
    _case(
        "docker_login_password",
        "docker login registry.example.com -u ci -p Rk8!mZ2qW9xT",
        "Rk8!mZ2qW9xT",
        "docker login registry.example.com -u ci --password-stdin < token.txt",
    ),
    _case(
        "mysql_pwd_env",
        "MYSQL_PWD=Lp4#vN9qZx2! mysqldump app > app.sql",
        "Lp4#vN9qZx2!",
        "The API key is read from the environment, never from the config file.",
    ),
]

#: More look-alikes in the forms real transcripts take (tests/data/transcripts/fp-corpus).
NOT_SECRETS: list[str] = [
    "const csrfToken = document.querySelector(\"meta[name='csrf-token']\")?.getAttribute('content')",
    "export const GET = createHandler({ auth: getSession, querySchema, handler })",
    "set({ user: data.user, token: data.token, isAuthenticated: true })",
    "OPENAI_API_KEY: env.OPENAI_API_KEY || 'proxy-handled'",
    "GOOGLE_CLIENT_SECRET: z.string().min(1).optional(),",
    "setMessages((prev) => [...prev, { key: currentMessage.key, value: currentMessage.value }])",
    '"@aws-sdk/credential-providers": "^3.948.0"',
    "- Token is one-time and expires by TTL.",
    "**Key Insight:** the watcher fires twice because both inotify and polling are on.",
    "**Key Transformations:**\n1. rename the module\n2. move the tests",
    "the client secret is passed via --client-secret-file, not on the command line",
    "Password: see the team's password manager entry 'staging db'",
    '{"tokenizer": "cl100k_base", "max_tokens": 4096}',
    '{"secret_name": "prod/db", "rotation_days": 30}',
    '{"authorization": "handled by the gateway, not the service"}',
]

#: A clean model answer: every field the product stores or tells, and no credential anywhere.
CLEAN_ANSWER: dict = {
    "actions": [
        {
            "action": "CREATE",
            "reason": "The person corrected the install command twice.",
            "learning": {
                "title": "Use pnpm install from the repository root",
                "category": "Tools",
                "key_insight": "Use pnpm install from the repository root; npm rewrites the "
                "lockfile and breaks the workspace links.",
                "problem": "Running npm install in packages/web rewrote pnpm-lock.yaml and the "
                "workspace packages stopped resolving.",
                "root_cause": "The repository is a pnpm workspace; npm ignores "
                "pnpm-workspace.yaml and writes its own package-lock.json.",
                "fix": "Deleted package-lock.json, ran pnpm install at the root, and added "
                '"packageManager": "pnpm@9.12.0" to package.json.',
                "rule": "Run pnpm install from the repository root; never run npm install in "
                "a workspace package.",
                "confidence_num": 0.9,
                "scope": "repo",
                "tags": ["pnpm", "monorepo", "lockfile", "token-budget", "auth"],
                "entities": ["pnpm", "npm", "pnpm-lock.yaml", "package.json", "KeyError"],
                "causal_relations": [
                    {"source": "npm install", "target": "broken lockfile", "type": "causes"}
                ],
                "evidence": "Wrong, I already told you: use pnpm install from the root, npm "
                "rewrites the lockfile.",
                "body": "## Problem\nnpm rewrote the lockfile.\n\n## Solution\nUse pnpm at the "
                "root.\n\n## Anti-Pattern\n`npm install` inside `packages/web`.\n\n## Context\n"
                "The API key for the registry is read from the environment (`NPM_TOKEN`); the "
                "token is never written to .npmrc.",
            },
        },
        {
            "action": "CREATE",
            "reason": "A root cause was confirmed by the failing test.",
            "learning": {
                "title": "The cache key must include the locale",
                "category": "Architecture",
                "key_insight": "The cache key must include the locale, or French users get "
                "English pages.",
                "problem": "Pages rendered for one locale were served to every locale.",
                "root_cause": "make_key() hashed only the path; the locale came from a cookie.",
                "fix": "Added request.LANGUAGE_CODE to the key in make_key().",
                "rule": "Include every input that changes the response in the cache key.",
                "confidence_num": 0.8,
                "scope": "global",
                "tags": ["cache", "i18n"],
                "entities": ["Django", "Redis", "make_key"],
                "causal_relations": [],
                "evidence": "the test passes once the locale is in the key",
                "body": "## Problem\nWrong locale served.\n\n## Solution\nKey on the locale.",
            },
        },
        {"action": "UPDATE", "target_id": "lrn-tools-3f9a1c", "reason": "Confirmed again."},
    ],
    "items": {
        "update": [{"id": "#a1b2c3", "status": "done", "note": "pnpm migration finished"}],
        "new": [
            {
                "kind": "action",
                "title": "Rotate the staging token before it expires on Friday",
                "body": "The secret rotation job runs hourly; check the auth logs afterwards.",
            },
            {
                "kind": "question",
                "title": "Should the password reset email move to the worker?",
                "body": "The key question is whether the web process may block on SMTP.",
            },
        ],
    },
    "summary": "Moved the workspace to pnpm and fixed the locale-blind cache key; the API "
    "key is read from the environment, never from the config file.",
}
