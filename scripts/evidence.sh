#!/usr/bin/env bash
# The adaptive-placement evidence (issue 4): runs `numapilot sim evidence` (release build) and rewrites README.md's
# section between <!-- evidence:begin --> and <!-- evidence:end --> with its tables and verdicts.
# Usage: scripts/evidence.sh [--quick] [--seeds N] [--threads N]   (arguments go to `numapilot sim evidence`)
# Without both markers in README.md it prints the tables, says the markers are missing and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only markdown goes into README.md: --json (JSON on stdout) and --out (files elsewhere) are refused.
for arg in "$@"; do
  case "$arg" in
    --json | --out | --out=*)
      echo "evidence.sh: $arg is not accepted here (README.md takes the markdown only); run \`numapilot sim evidence $arg ...\` directly" >&2
      exit 2
      ;;
  esac
done
cargo build --release -q -p numapilot
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
out=$(mktemp)
trap 'rm -f "$out" "$out.readme"' EXIT
"${target_dir:-target}/release/numapilot" sim evidence "$@" >"$out"
begin='<!-- evidence:begin -->'
end='<!-- evidence:end -->'
if ! grep -qF 'targets pass' "$out"; then
  cat "$out"
  echo "evidence.sh: the output has no 'targets pass' summary line; README.md not rewritten" >&2
  exit 1
fi
if ! grep -qxF "$begin" README.md || ! grep -qxF "$end" README.md; then
  cat "$out"
  echo "evidence.sh: README.md lacks the markers '$begin' and '$end' (each on a line of its own); not rewritten" >&2
  exit 1
fi
# Keep everything up to and including the begin marker, the new tables, the end marker and the rest.
awk -v begin="$begin" -v end="$end" -v file="$out" '
  $0 == begin { print; print ""; while ((getline line < file) > 0) print line; print ""; skipping = 1; next }
  $0 == end { skipping = 0 }
  !skipping { print }
' README.md >"$out.readme"
mv "$out.readme" README.md
grep -F 'targets pass' "$out"
echo "evidence.sh: README.md evidence section rewritten" >&2
