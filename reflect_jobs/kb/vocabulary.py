"""Word lists of the heuristic entity extractor (``kb/heuristic.py``): names it may trust.

Each list is matched as whole words, case-insensitively. A name that is also a common
English word ("go", "make", "react", "black", "click", "rich", "just") is left out: a wrong
entity pollutes the graph for every later query, a missing one only costs recall.
"""

from __future__ import annotations


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Languages, tools, libraries, services and platforms a coding session names.
TECHNOLOGIES = _words(
    """
    python rust golang java kotlin typescript javascript nodejs node.js deno bun ruby php perl
    bash zsh fish powershell c++ csharp scala elixir erlang haskell lua swift dart zig ocaml
    npm npx pnpm yarn corepack pip pipx uv poetry pipenv hatch pdm conda mamba cargo rustc
    rustup clippy rustfmt gradle maven cmake bazel ninja meson homebrew apt dnf nix
    setuptools virtualenv venv pyenv nvm tox nox pre-commit
    docker dockerfile podman docker-compose kubernetes k8s kubectl helm minikube terraform
    pulumi ansible vagrant systemd launchd cron crontab nginx caddy traefik haproxy gunicorn
    uvicorn
    postgres postgresql psql psycopg psycopg2 asyncpg mysql mariadb sqlite sqlite3 redis
    memcached mongodb elasticsearch opensearch kafka rabbitmq nats zeromq duckdb clickhouse
    cassandra dynamodb bigquery snowflake supabase firebase prisma sequelize typeorm knex
    mongoose diesel sqlx
    git github gitlab bitbucket gh pytest unittest hypothesis tenacity jest vitest mocha
    cypress playwright selenium puppeteer mypy pyright ruff flake8 pylint isort eslint
    prettier biome tsc webpack vite esbuild rollup babel turbo lerna storybook
    reactjs vue vuejs svelte nextjs next.js nuxt angular redux tailwind tailwindcss jquery
    django flask fastapi starlette sqlalchemy alembic pydantic celery huey dramatiq
    requests httpx aiohttp urllib3 dateutil pytz asyncio tokio serde axum actix
    numpy pandas polars scipy pytorch torch tensorflow jax sklearn scikit-learn networkx
    matplotlib jupyter
    yaml toml graphql grpc protobuf openapi swagger websocket websockets oauth jwt
    ssh rsync scp openssl curl wget jq
    linux ubuntu debian alpine macos windows wsl aws gcp azure s3 ec2 lambda cloudflare
    vercel netlify heroku sentry datadog prometheus grafana opentelemetry
    vscode vim neovim emacs tmux claude codex copilot openai anthropic ollama
    """
)
#: How a technology is written when its lower-case form reads wrong.
DISPLAY = {"c++": "C++", "node.js": "Node.js", "next.js": "Next.js"}

#: Software-engineering concepts worth a graph node, longest phrases first when matched.
CONCEPTS = _words(
    """
    retry retries backoff exponential-backoff timeout timeouts busy-timeout deadline
    lockfile lock-file workspace monorepo dependency dependencies lock locks locking deadlock
    race-condition thread threads thread-safety connection connections connection-pool
    transaction transactions migration migrations schema index indexes cache caching
    cache-invalidation rate-limit rate-limiting pagination idempotency queue worker workers
    event-loop async blocking-call concurrency parallelism
    environment-variable environment-variables env-var secret secrets credentials api-key
    token tokens password passwords encryption hashing
    timezone timezones utc utc-offset timestamp timestamps encoding unicode utf-8
    logging logger log-level structured-logging tracing metrics
    feature-flag commit-message pull-request code-review
    rebase merge-conflict fixup-commit force-push main-branch
    unit-test integration-test end-to-end-test fixture fixtures mock mocks mocking
    flaky-test snapshot-test coverage regression benchmark profiling
    type-hints type-checking linting formatting docstring docstrings
    exception exceptions bare-except error-handling null-check validation input-validation
    sql-injection escaping sanitisation sanitization serialization deserialization json-schema
    memory-leak global-state side-effect dependency-injection singleton
    configuration config-file build-cache base-image multi-stage-build
    image-size container containers volume volumes port proxy dns certificate tls
    permissions file-permissions symlink symlinks shell-script
    webhook webhooks http-client status-code
    generated-files vendoring monkeypatch changelog version-bump semver deprecation
    """
)
#: ``errno`` names and the npm/node error codes built on them (``ECONNREFUSED``…).
ERRNO = _words(
    """
    EPERM ENOENT ESRCH EINTR EIO ENXIO E2BIG ENOEXEC EBADF ECHILD EAGAIN ENOMEM EACCES
    EFAULT EBUSY EEXIST EXDEV ENODEV ENOTDIR EISDIR EINVAL ENFILE EMFILE ENOTTY ETXTBSY
    EFBIG ENOSPC ESPIPE EROFS EMLINK EPIPE EDOM ERANGE EDEADLK ENAMETOOLONG ENOLCK ENOSYS
    ENOTEMPTY ELOOP EWOULDBLOCK ENOTSOCK EADDRINUSE EADDRNOTAVAIL ENETDOWN ENETUNREACH
    ECONNABORTED ECONNRESET ENOBUFS EISCONN ENOTCONN ESHUTDOWN ETIMEDOUT ECONNREFUSED
    EHOSTDOWN EHOSTUNREACH EALREADY EINPROGRESS ESTALE EDQUOT ECANCELED EOVERFLOW ENOTSUP
    EPROTO ENOTFOUND EAI_AGAIN ERESOLVE ELIFECYCLE EINTEGRITY EBADENGINE ENOTCACHED
    """
)
