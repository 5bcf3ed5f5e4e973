#!/usr/bin/env bash
# make demo: the whole story on the embedded default (SQLite queue + ledger, a KB folder).
# Uses the real `claude` CLI when it is installed, else the heuristic writer (no model).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
demo="$here/.demo"
rm -rf "$demo"
export REFLECT_HOME="$demo/home" GLOBAL_LEARNINGS_PATH="$demo/learnings"
export REFLECT_CAPTURE_SETTLE_SEC=0 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export REFLECT_DRAIN_CWD="$demo"
rj="$here/.venv/bin/reflect-jobs"
hook="$here/.venv/bin/reflect-jobs-hook"
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. Hooks fire: each session end enqueues a capture (stdlib only, prints nothing)"
for f in "$here"/samples/*.jsonl; do
  case "$f" in *codex*) h=codex ;; *copilot*) h=copilot ;; *) h=claude ;; esac
  printf '{"session_id":"%s","transcript_path":"%s","hook_event_name":"SessionEnd"}' \
    "$(basename "$f" .jsonl)" "$f" | "$hook" "$h"
  echo "  $h hook -> $(basename "$f")"
done

step "2. Drain: capture -> prepare (\$0 cascade) -> write (the only paid step) -> add -> reindex"
"$rj" drain --until-idle --max-seconds 240

step "3. Jobs and their outcomes"
"$rj" jobs

step "4. Status"
"$rj" status

step "5. Notes written to $GLOBAL_LEARNINGS_PATH/documents"
ls -1 "$GLOBAL_LEARNINGS_PATH/documents" | grep '\.md$' || echo "  (none)"

step "6. Review: learnings no model vouched for wait, with their evidence (never told until accepted)"
"$rj" review
ids=$("$rj" review --json | "$here/.venv/bin/python" -c \
  'import json,sys; print(" ".join(r["id"] for r in json.load(sys.stdin)))')
set -- $ids
waiting=$#
accepted=0
for id in "$@"; do
  [ "$accepted" -ge 2 ] && break
  "$rj" review accept "$id" && accepted=$((accepted + 1))
done
echo "$waiting learnings waiting for review; accepted $accepted"
"$rj" drain --until-idle --max-seconds 60 >/dev/null  # the reindex the accepts asked for
"$rj" status | grep '^review' || echo "review: nothing left waiting"

step "7. Search: 'database is locked sqlite threads'"
"$rj" search "database is locked sqlite threads" -k 3

step "8. Cost report"
"$rj" cost --by outcome

echo
echo "Demo state is in $demo (delete it freely)."
