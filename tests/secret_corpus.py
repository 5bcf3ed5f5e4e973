"""The secret-shape corpus shared by the redaction tests (all values are fake).

Each entry: ``(name, secret, template, lookalike)``. ``template.format(secret)`` is how the
secret appears in a message or a model answer; ``secret`` is the part that must not survive;
``lookalike`` is a near miss that is NOT a secret (a prefix alone, a placeholder, a git hash,
a word after "token is") and must come out of redaction unchanged.
"""

from __future__ import annotations

B64_PEM_RSA = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVB"

SECRETS: list[tuple[str, str, str, str]] = [
    # --- vendor prefixes -------------------------------------------------------------------
    (
        "aws_access_key",
        "AKIAIOSFODNN7EXAMPLE",
        "export AWS_ACCESS_KEY_ID={}",
        "id AKIAIOSFODNN7EXAMPL is short",
    ),
    (
        "aws_sts_key",
        "ASIAY34FZKBOKMUTVV7A",
        "the temp key is {} right now",
        "ASIA-Pacific is ap-southeast-1",
    ),
    (
        "aws_session_token",
        "FwoGZXIvYXdzEBYaDHqa0AP1kVpX2Hb7yLCAV0j0F5Jf9jYGqB8Y0v3t2K9lWm4nQ7xR1sZ6cU8eA3bD5fH0iJ2kL4",
        "sts returned {} for the role",
        "FwoGZXIvYXdz alone is a prefix",
    ),
    (
        "github_pat_classic",
        "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
        "token: {}",
        "ghp_ is GitHub's PAT prefix",
    ),
    (
        "github_oauth",
        "gho_16C7e42F292c6912E7710c838347Ae178B4a",
        "use {} for the API",
        "gho_short123 is too short",
    ),
    (
        "github_fine_grained",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV",
        "GH={}",
        "github_pat_ is the fine-grained prefix",
    ),
    ("gitlab", "glpat-xYz0123456789AbCdEfGh", "gitlab token {}", "glpat- tokens expire"),
    (
        "slack_bot",
        "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
        "slack {}",
        "xoxb- tokens start so",
    ),
    (
        "slack_user",
        "xoxp-123456789012-123456789012-123456789012-abcdef0123456789",
        "{}",
        "xoxp-1234 is short",
    ),
    (
        "slack_app",
        "xapp-1-A0123456789-1234567890123-abcdef0123456789abcdef0123456789",
        "SLACK_APP={}",
        "xapp-1 is the app-level prefix",
    ),
    (
        "slack_webhook",
        "https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
        "post to {}",
        "see https://hooks.slack.com/apps for docs",
    ),
    (
        "discord_webhook",
        "https://discord.com/api/webhooks/123456789012345678/AbCdEf0123456789_-AbCdEf0123456789",
        "notify {}",
        "https://discord.com/developers/docs is the manual",
    ),
    (
        "stripe_live",
        "sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "stripe.api_key = '{}'",
        "sk_live_ keys are secret",
    ),
    (
        "stripe_restricted",
        "rk_live_51H8sdfJHKLsdf8sdfJKLsdf",
        "key {} in prod",
        "rk_live_short is short",
    ),
    (
        "stripe_webhook",
        "whsec_5f8a0b1c2d3e4f5a6b7c8d9e0f1a2b3c",
        "STRIPE_WH {}",
        "whsec_ signs webhooks",
    ),
    (
        "openai_legacy",
        "sk-abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJ",
        "OPENAI {}",
        "sk-learn is a library",
    ),
    (
        "openai_project",
        "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7cDe0fGh3iJk6lMn9oPq2rSt5uVw8x",
        "my key is {}",
        "sk-proj- is the project prefix",
    ),
    (
        "anthropic",
        "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
        "ANTHROPIC_API_KEY={}",
        "sk-ant- is Anthropic's prefix",
    ),
    ("groq", "gsk_aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hJ6kM9nP", "GROQ {}", "gsk_ is Groq's prefix"),
    (
        "google_api",
        "AIzaSyDaGmWKa4JsXZ-HjGw7ISLn_3namBGewQe",
        "maps key {}",
        "AIza is the Google key prefix",
    ),
    (
        "google_oauth",
        "ya29.a0AfH6SMBx3Kq9vVbCdEfGhIjKlMnOpQrStUv",
        "Bearer-less {}",
        "ya29.short is short",
    ),
    (
        "google_client_secret",
        "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",
        "oauth {}",
        "GOCSPX- is the prefix",
    ),
    (
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
        ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
        "the session cookie was {}",
        "eyJhbGciOiJIUzI1NiJ9 is only a header",
    ),
    (
        "npm",
        "npm_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        "//registry.npmjs.org/:_authToken={}",
        "npm_config_cache=/tmp/npm",
    ),
    (
        "pypi",
        "pypi-AgEIcHlwaS5vcmcCJDAwMDAwMDAwLTAwMDAtMDAwMC0wMDAwLTAwMDAwMDAwMDAwMAACKlsz",
        "{}",
        "pypi-simple is an index",
    ),
    (
        "huggingface",
        "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567",
        "HF {}",
        "hf_hub_download is a function",
    ),
    (
        "sendgrid",
        "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",
        "SENDGRID={}",
        "SG.1 is a section number",
    ),
    (
        "twilio_key",
        "SK0123456789abcdef0123456789abcdef",
        "twilio key {}",
        "SKU0123 is a stock unit",
    ),
    ("mailgun", "key-0123456789abcdef0123456789abcdef", "mailgun {}", "key-value stores are fast"),
    ("digitalocean", "dop_v1_" + "a1b2c3d4" * 8, "DO={}", "dop_v1_ is the prefix"),
    ("shopify", "shpat_0123456789abcdef0123456789abcdef", "SHOP {}", "shpat_ is Shopify's prefix"),
    (
        "databricks",
        "dapi0123456789abcdef0123456789abcdef",
        "DBX {}",
        "dapi is the Databricks prefix",
    ),
    (
        "heroku_v2",
        "HRKU-AAbCdEfGhIjKlMnOpQrStUvWxYz0123456789_abcdefghijklmnopq",
        "HK {}",
        "HRKU- is the prefix",
    ),
    (
        "vault",
        "hvs.CAESIJlWn4Kz8Lq2Xp7Rt3Vy6Nm0Bs9Dc5Fg1Hj4Kl7",
        "VAULT {}",
        "hvs. is Vault's prefix",
    ),
    (
        "grafana",
        "glsa_AbCdEfGhIjKlMnOpQrStUvWxYz012345_0a1b2c3d",
        "GRAFANA {}",
        "glsa_ is the prefix",
    ),
    (
        "sentry",
        "sntrys_eyJpYXQiOjE2OTQwMzQ2NTguNzk1MDM1LCJ1cmwiOiJodHRwczovL3NlbnRyeS5pbyJ9_aBcDeFgHiJ",
        "SENTRY {}",
        "sntrys_ is Sentry's prefix",
    ),
    (
        "linear",
        "lin_api_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789ABCD",
        "LINEAR {}",
        "lin_api_ is the prefix",
    ),
    (
        "docker_pat",
        "dckr_pat_2b3e36beeb386dfdaacb9b46004cc",
        "DOCKER {}",
        "dckr_pat_ is the prefix",
    ),
    ("newrelic", "NRAK-0123456789ABCDEFGHIJKLMNOPQ", "NR {}", "NRAK- is the prefix"),
    (
        "doppler",
        "dp.pt.AbCdEfGhIjKlMnOpQrStUvWxYz0123456789ABCDEFG",
        "DOPPLER {}",
        "dp.pt. is the prefix",
    ),
    (
        "age",
        "AGE-SECRET-KEY-1QQPZRY9X8GF2TVDW0S3JN54KHCE6MUA7LQPZRY9X8GF2TVDW0S3JN54KHCE6",
        "age key {}",
        "AGE-SECRET-KEY-1 is the prefix",
    ),
    (
        "discord_bot",
        "MTk4NjIyNDgzNDcxOTI1MjQ4.Cl2FMQ.ZnCjm1XVW7vRze4b7Cq4se7kKWs",
        "DISCORD_BOT={}",
        "MTk4NjIyNDgzNDcxOTI1MjQ4 is a base64 id",
    ),
    (
        "telegram_bot",
        "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw",
        "bot = telebot.TeleBot('{}')",
        "at 12:34:56 it ran",
    ),
    (
        "azure_client_secret",
        "Xy48Q~abcdefGHIJKLmnopQRSTuvwxYZ012345",
        "value {}",
        "abcQ~short is not one",
    ),
    (
        "basic_auth",
        "dXNlcm5hbWU6cGFzc3dvcmQxMjM=",
        "Authorization: Basic {}",
        "Basic functionality tests",
    ),
    (
        "bearer",
        "abcdef0123456789abcdef0123456789xyz",
        "Authorization: Bearer {}",
        "Authorization: Bearer $TOKEN",
    ),
    # --- URLs and command lines ------------------------------------------------------------
    (
        "url_password_pg",
        "s3cr3tPa55",
        "DATABASE_URL=postgres://admin:{}@db.internal:5432/app",
        "postgres://admin@db.internal:5432/app",
    ),
    (
        "url_password_redis",
        "hunter2hunter2",
        "redis://default:{}@cache:6379/0",
        "redis://cache:6379/0",
    ),
    (
        "redis_empty_user",
        "p4ssw0rdRedis",
        "redis://:{}@cache.internal:6379/0",
        "redis://cache.internal:6379/0",
    ),
    (
        "git_clone_token",
        "s3cr3tT0kenValue99",
        "git clone https://oauth2:{}@gitlab.com/team/repo.git",
        "git clone https://gitlab.com/team/repo.git",
    ),
    (
        "curl_u",
        "Sup3rS3cret",
        "curl -u admin:{} https://api.example.com/v1",
        "curl -u admin: https://api.example.com/v1",
    ),
    ("mysql_p", "Tr0ub4dor", "mysql -u root -p{} -h db app", "mysql -u root -p -h db -P 3306 app"),
    (
        "sshpass",
        "R3dH0t!Chili",
        "sshpass -p {} ssh deploy@host",
        "sshpass -p $SSHPASS ssh deploy@host",
    ),
    (
        "azure_ad_flag",
        "plain-Secret-4-az-login",
        "az login --service-principal -u 8f1e0c6a-1111-2222-3333-444455556666 -p {} --tenant t1",
        "az login --service-principal -u http://app -p $AZ_SECRET --tenant t1",
    ),
    (
        "password_flag",
        "s3cr3t-Pa55",
        "mycli --host db --password {} app",
        "psql --password --host db",
    ),
    (
        "token_flag",
        "dpl_9Xk2mQ7vR4tZ8wL1",
        "./deploy --api-token {}",
        "./deploy --api-token-file ~/.tok",
    ),
    # --- names with values -----------------------------------------------------------------
    (
        "aws_secret_key",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key = {}",
        "aws_secret_access_key = ${AWS_SECRET}",
    ),
    (
        "aws_secret_bare",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzz9PLEKEY1",
        "AWS credentials row: AKIAIOSFODNN7EXAMPLE,{}",
        "AWS deploy of commit 3f786850e387550fdab836ed7e6dc881de23001b",
    ),
    ("env_password", "CorrectHorse42", "DB_PASSWORD={}", "DB_PASSWORD=$DB_PASSWORD"),
    ("pgpassword", "pgS3cret99", "PGPASSWORD={} psql -h db", "PGPASSWORD= psql -h db"),
    ("json_password", "correct horse battery staple", '{{"password": "{}"}}', '{"password": null}'),
    ("yaml_secret", "9f8e7d6c5b4a39281706", "client_secret: {}", "client_secret: ${CLIENT_SECRET}"),
    ("api_key_assignment", "zq8Hk2LmP0xR5tYw", "API_KEY = '{}'", "api_key = os.environ['API_KEY']"),
    (
        "azure_storage",
        "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core.windows.net",
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=<key>;EndpointSuffix=x",
    ),
    (
        "azure_sas",
        "sv=2021-06-08&ss=b&sig=AbCdEf0123456789AbCdEf0123456789AbCdEf01234%3D",
        "SharedAccessSignature={}",
        "the sig= parameter of a SAS URL",
    ),
    (
        "sql_connection_string",
        "Xq7!pLm2zR",
        "Server=tcp:db.example.com;Database=app;User ID=sa;Password={};Encrypt=true",
        "Server=tcp:db.example.com;Password=;Encrypt=true",
    ),
    ("npm_auth", "dXNlcm5hbWU6cGFzc3dvcmQ=", "//registry.npmjs.org/:_auth={}", "always-auth=true"),
    (
        "npm_password",
        "aHVudGVyMmh1bnRlcjI=",
        "//registry.npmjs.org/:_password={}",
        "_password holds base64 in .npmrc",
    ),
    (
        "docker_auth",
        "dXNlcjpzM2NyM3QtZG9ja2Vy",
        '{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{}"}}}}}}',
        '{"auths": {"ghcr.io": {}}, "credsStore": "desktop"}',
    ),
    (
        "kube_client_key_data",
        B64_PEM_RSA,
        "users:\n- name: admin\n  user:\n    client-key-data: {}",
        "    certificate-authority-data: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t",
    ),
    (
        "kube_token",
        "abcdef.0123456789abcdef",
        "    token: {}",
        "    tokenFile: /var/run/secrets/token",
    ),
    (
        "gcp_private_key_id",
        "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
        '"private_key_id": "{}"',
        '"private_key_path": "/etc/keys/sa.json"',
    ),
    ("secret_is_phrase", "Zx9!qLm2#Tr", "the secret is {}", "The secret is fixtures."),
    ("password_is_phrase", "hunter2!", "my password is {}", "the password is required"),
    ("token_phrase", "a8F3kZ0qLm7XpR2vT9wY", "token {}", "token count went up"),
    ("generic_key", "f3a9c2e7b1d84a6f9e0c5b2a7d1e8f40", "WEATHER_KEY={}", '{"key": "session_id"}'),
    (
        "twilio_auth_token",
        "e72f0c3b9d5a41f6a8b2c7d0e93f1a64",
        "twilio auth token {}",
        "twilio sent 3 messages",
    ),
    # --- vendor words with a prefix-less key ------------------------------------------------
    (
        "datadog_api_key",
        "9f3b8c2e1d4a5f6b7c8d9e0f1a2b3c4d",
        "datadog: {}",
        "datadog dashboard 0123 shows p95",
    ),
    (
        "datadog_app_key",
        "9f3b8c2e1d4a5f6b7c8d9e0f1a2b3c4d5e6f7a8b",
        "DD_APP_KEY={}",
        "DD_APP_KEY is set in CI secrets",
    ),
    (
        "heroku_uuid",
        "01234567-89ab-cdef-0123-456789abcdef",
        "heroku auth:token -> {}",
        "session 5f0c7e1a-2b3d-4c5e-8f90-123456789abc started",
    ),
    (
        "mailchimp",
        "0123456789abcdef0123456789abcdef-us21",
        "mailchimp key {}",
        "mailchimp list us21 has 300 members",
    ),
]

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3tihPmljnnudb9G3HECdnH\n"
    "lWu2/a1gB9JW5TBQ+AVpum9Okx7KfqkfBKL9mcHgSVYKJkY3l9eVt+GKuMXvdrvW\n"
    "-----END RSA PRIVATE KEY-----"
)
PEM_SECRET = "MIIEpAIBAAKCAQEA1c7+9z5Pad7OejecsQ0bu3aozN3tihPmljnnudb9G3HECdnH"

#: Prose and code that mention secrets without holding one.
PLAIN_TEXT: list[str] = [
    "The token count is 5 and max_tokens=1000.",
    "password: str = Field(...)",
    "api_key = os.environ['API_KEY']",
    "Use a bearer token from the environment.",
    "The secret to fast tests is fixtures.",
    "sk-learn is a library; skip it",
    '{"input_tokens": 123456, "output_tokens": 654321, "cache_read_input_tokens": 1234567}',
    "tokenizer: bert-base-uncased",
    "The token is invalid, please log in again.",
    "Token: expired",
    "git checkout 3f786850e387550fdab836ed7e6dc881de23001b",
    "session_id 5f0c7e1a-2b3d-4c5e-8f90-123456789abc",
    "Authorization header missing; oauth_provider: github",
    "mkdir -p build && docker run -p 8080:80 app",
    "laws and draws: 0123456789abcdef0123456789abcdef",
    "keyboard: qwerty, monkey: banana123, keys = ['a', 'b']",
    'sort(key=lambda r: r.id); {"key": "name", "value": "x"}',
]
