#!/usr/bin/env bash
# The accelerator validation, one command from the repository root (docs/validation/README.md):
#   OUT=/some/empty/dir bash docs/validation/run.sh
# Results: $OUT/validation.json and $OUT/validation.md (without OUT: docs/validation/out/).
# Every step runs under its own timeout inside a budget of VALIDATE_BUDGET_S seconds (default 420);
# this wrapper's own timeout ends it even if the script itself hangs. PYTHON picks the interpreter.
set -uo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-docs/validation/out}
mkdir -p "$OUT"
budget=${VALIDATE_BUDGET_S:-420}
timeout -k 10 $((budget + 40)) "$PYTHON" docs/validation/validate.py --out "$OUT" --budget "$budget" "$@"
rc=$?
[ "$rc" = 0 ] || echo "run.sh: validate.py exited $rc; the results so far are in $OUT" >&2
exit "$rc"
