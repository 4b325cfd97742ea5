#!/usr/bin/env bash
# Runs a fuzzer (the policy parser's, the environment scanner's) for a bounded
# time over its seed corpus and examples (the example policies). The
# dictionary is tests/fuzz/<name>.dict for <name>_fuzzer, if there is one.
#
#   run_fuzzer.sh <fuzzer-binary> <corpus-dir> <examples-dir>
#
# The seeds are copied into a temporary corpus, so the run never writes into
# the source tree. Exits nonzero if the fuzzer finds a crash, leak, timeout or
# out-of-memory; the reproducer is kept in $FUZZ_ARTIFACT_DIR (default: a
# fuzz-artifacts directory next to the fuzzer binary).
# Environment: FUZZ_SECONDS (default 30).
set -euo pipefail

if [[ $# -ne 3 ]]; then
  echo "usage: $0 <fuzzer-binary> <corpus-dir> <examples-dir>" >&2
  exit 2
fi
fuzzer=$1
seeds=$2
examples=$3
seconds=${FUZZ_SECONDS:-30}

if [[ ! -x $fuzzer ]]; then
  echo "run_fuzzer: $fuzzer is not an executable fuzzer (build with -DCORDON_FUZZ_ONLY=ON)" >&2
  exit 2
fi
for dir in "$seeds" "$examples"; do
  if [[ ! -d $dir ]]; then
    echo "run_fuzzer: $dir is not a directory" >&2
    exit 2
  fi
done

fuzzer=$(cd "$(dirname "$fuzzer")" && pwd)/$(basename "$fuzzer")
artifact_dir=${FUZZ_ARTIFACT_DIR:-$(dirname "$fuzzer")/fuzz-artifacts}
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dict=$script_dir/$(basename "$fuzzer" _fuzzer).dict

work=$(mktemp -d "${TMPDIR:-/tmp}/cordon-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
find "$seeds" "$examples" -maxdepth 1 -type f -exec cp {} "$work/corpus/" \;
seed_count=$(find "$work/corpus" -type f | wc -l)

args=(
  -max_total_time="$seconds"
  -max_len=4096
  -timeout=5
  -rss_limit_mb=2048
  -print_final_stats=1
  -artifact_prefix="$work/artifacts/"
)
[[ -f $dict ]] && args+=(-dict="$dict")

echo "run_fuzzer: $(basename "$fuzzer") for ${seconds}s, $seed_count seed files"
# UBSan reports do not stop a run by default: make them findings.
status=0
UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1} \
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
  "$fuzzer" "${args[@]}" "$work/corpus" >"$work/log" 2>&1 || status=$?

runs=$(grep -oE 'Done [0-9]+ runs' "$work/log" | grep -oE '[0-9]+' | tail -n 1 || true)
coverage=$(grep -oE 'cov: [0-9]+' "$work/log" | tail -n 1 || true)
corpus_size=$(find "$work/corpus" -type f | wc -l)
artifacts=$(find "$work/artifacts" -type f | wc -l)

if [[ $status -ne 0 || $artifacts -ne 0 ]]; then
  tail -n 60 "$work/log" >&2
  mkdir -p "$artifact_dir"
  find "$work/artifacts" -type f -exec cp {} "$artifact_dir/" \;
  echo "run_fuzzer: FAILED (exit $status, $artifacts reproducer(s) saved in $artifact_dir)" >&2
  echo "run_fuzzer: reproduce with: $fuzzer <reproducer>" >&2
  exit 1
fi
echo "run_fuzzer: OK: ${runs:-?} runs in ${seconds}s, ${coverage:-cov: ?}," \
  "corpus $seed_count -> $corpus_size inputs, no crashes"
