"""The ledger: the durable truth about jobs, money and learnings (SQLite or PostgreSQL).

Huey only carries "run stage S of job J"; everything a person or a recovery pass needs to
know is here, so a lost message or a dead worker costs a re-send, never a job. One module
per concern: :mod:`.models` (the tables), :mod:`.db` (engines, sessions, migrations),
:mod:`.moves` (the state machine's rules), :mod:`.jobs` and :mod:`.gateway` (the only
code that moves a job: through the ORM, and in Core on a $0 job's hot path), :mod:`.costs` (what every
attempt spent), :mod:`.learnings` (provenance and proof), :mod:`.control` (halt, heartbeats,
quota telemetry, the errors ledger), :mod:`.view` (the read-only view ``prepare`` uses) and
:mod:`.admin` (what a person does from the CLI).

Nothing is imported here, so ``import reflect_jobs.ledger.db`` pulls in only what it needs.
"""
