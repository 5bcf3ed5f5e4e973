# reflect-jobs — see README.md. `make demo` and `make test` are the two commands.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# The tests start thousands of interpreters (hooks, CLIs, consumers): with
# PYTHONDONTWRITEBYTECODE from the caller's environment each one compiles the package's
# modules again (the suite took 10 minutes instead of 4). Bytecode goes to __pycache__/,
# which git ignores.
unexport PYTHONDONTWRITEBYTECODE

TORCH_PIN := torch==2.13.0
NANO_PIN  := nano-graphrag==0.0.8.2

.PHONY: install reinstall demo test test-fast chaos bench lint typecheck format clean

# The stamp holds a hash of what the install depends on — pyproject.toml's content and the
# two pins above — so `make demo` and `make test` (and .ci/run, which runs `make install`
# first) reinstall only when one of them changed, not whenever pyproject.toml's mtime is
# newer than the stamp (always, in a fresh clone).
INSTALL_HASH = $(shell $(PY) -c 'import hashlib, sys; h = hashlib.sha256(open("pyproject.toml", "rb").read()); h.update(sys.argv[1].encode()); print(h.hexdigest())' '$(TORCH_PIN) $(NANO_PIN)')

install:
	@if [ -x $(BIN)/python ] && [ "$$(cat $(STAMP) 2>/dev/null)" = "$(INSTALL_HASH)" ]; then \
	  echo "$(VENV) is up to date (pyproject.toml and the pins unchanged)"; \
	else \
	  $(MAKE) --no-print-directory reinstall; \
	fi

# Order matters (NOTES-deps): CPU torch first, so sentence-transformers does not pull a
# multi-GB CUDA build; nano-graphrag without its heavy extras (graspologic, dspy, litellm).
reinstall:
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q $(TORCH_PIN)
	$(BIN)/pip install -q -e '.[index,writers,dev,mcp,ui]'
	$(BIN)/pip install -q --no-deps $(NANO_PIN)
	echo '$(INSTALL_HASH)' > $(STAMP)

demo: install
	bash scripts/demo.sh

# The fast subset, then every fault-injection test (-m chaos: tests/chaos and the kill,
# corruption and failpoint tests elsewhere) with TEST_CHAOS_TRIALS trials per kill point,
# so CI runs both; the chaos half runs even when the fast half failed, and either failing
# (or collecting nothing: pytest's exit 5) fails the target. `make chaos` runs 20 trials.
# TEST_WORKERS pytest-xdist workers: most tests wait on subprocesses (consumers, hooks, the
# stub model), so 3 workers keep 2 cores busy; a file's tests run on one worker
# (--dist loadfile), so tests that share an external resource live in one file (the
# scale-out tests flush one Redis database). TEST_WORKERS=0 runs
# everything in one process.
TEST_CHAOS_TRIALS ?= 1
TEST_WORKERS ?= 3
XDIST := $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadfile)

test: install
	$(BIN)/python -m pytest -q $(XDIST) -m "not chaos"; fast=$$?; \
	CHAOS_TRIALS=$(TEST_CHAOS_TRIALS) $(BIN)/python -m pytest -q $(XDIST) -m chaos; chaos=$$?; \
	echo "make test: fast subset exit $$fast, chaos suite exit $$chaos"; \
	test $$fast -eq 0 && test $$chaos -eq 0

test-fast: install
	$(BIN)/python -m pytest -q -m "not chaos and not slow and not services"

chaos: install
	CHAOS_TRIALS=20 $(BIN)/python -m pytest -q -m chaos

# Every bench_*.py script in bench/ (the rest are their helpers), with the arguments
# docs/BENCHMARKS.md was produced with; ~70 minutes on 2 cores (the recall evaluation at
# 2,000 notes is half of it). tests/test_bench_listed.py keeps the list complete.
bench: install
	$(BIN)/python bench/bench_hook.py --runs 60
	$(BIN)/python bench/bench_prepare.py
	$(BIN)/python bench/bench_redact.py --mb 1
	$(BIN)/python bench/bench_queue.py --jobs 200
	$(BIN)/python bench/bench_queue.py --jobs 200 --redis-pg
	$(BIN)/python bench/bench_zero_job.py --jobs 300 --reps 5
	$(BIN)/python bench/bench_kb.py --sizes 241,1000,5000
	$(BIN)/python bench/bench_index.py --sizes 241,1000,5000
	$(BIN)/python bench/bench_cost_model.py --seed 20261101
	$(BIN)/python bench/report_transcripts.py
	$(BIN)/python bench/bench_recall_hook.py --runs 25
	$(BIN)/python bench/bench_recall_quality.py
	$(BIN)/python bench/bench_dashboard.py --runs 5
	$(BIN)/python bench/bench_warm.py --repeat 2
	$(BIN)/python bench/bench_reflections.py --runs 30
	$(BIN)/python bench/bench_checkpoints.py --turns 200
	$(BIN)/python bench/bench_statusline.py --runs 40
	$(BIN)/python bench/bench_memory_search.py --runs 20
	$(BIN)/python bench/bench_heuristic_writer.py
	$(BIN)/python bench/bench_hostile_store.py --runs 9
	$(BIN)/python bench/bench_evidence.py
	$(BIN)/python bench/bench_anchors.py --files 50000 --reps 5
	$(BIN)/python bench/bench_mcp_redteam.py
	$(BIN)/python bench/bench_recall_eval.py --split test --scale both
	$(BIN)/python bench/bench_recall_prompt.py --runs 11
	$(BIN)/python bench/bench_verify.py --runs 15 --files 50000
	$(BIN)/python bench/bench_staleness.py
	$(BIN)/python bench/bench_search_worker.py --notes 300 --repeat 5
	$(BIN)/python bench/bench_nightly.py --learnings 1000 --sessions 200
	$(BIN)/python bench/bench_pending_global.py --notes 5000 --pending 50 --runs 20

# The whole tree (pyproject's [tool.ruff] excludes .venv and alembic/versions); both halves
# run and either failing fails the target, so one run reports lint and format together.
lint: install
	$(BIN)/ruff check .; check=$$?; \
	$(BIN)/ruff format --check .; fmt=$$?; \
	test $$check -eq 0 && test $$fmt -eq 0

# mypy on the whole package, strict on ledger/, pipeline/ and writer/: pyproject's [tool.mypy].
typecheck: install
	$(BIN)/mypy

format: install
	$(BIN)/ruff format .

clean:
	rm -rf .demo .pytest_cache .ruff_cache build *.egg-info
