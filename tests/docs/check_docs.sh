#!/usr/bin/env bash
# The man pages and completion that tools/gen_docs.py makes from the --help
# texts: a page per command that man renders without a warning, whose options
# the command's parser knows (each is given to the command with an unknown
# option after it, as nobody: the error must name that unknown one, never the
# documented option); and a bash completion that completes commands, options
# and values.
#   check_docs.sh CORDON_BINARY DOCS_DIR
set -euo pipefail
cordon=$1
docs=$2
fail=0
bad() { echo "check_docs: $*" >&2; fail=1; }

commands=$("$cordon" --help | sed -n '/^commands:/,/^$/p' | awk 'NR > 1 && NF {print $1}')
[ -n "$commands" ] || bad "no commands in cordon --help"
for page in cordon $(printf 'cordon-%s ' $commands); do
  file=$docs/man1/$page.1
  [ -s "$file" ] || { bad "$file is missing"; continue; }
  warnings=$(MANWIDTH=100 man --warnings -l "$file" 2>&1 >/dev/null || true)
  [ -z "$warnings" ] || bad "$page: man warns: $warnings"
  grep -q "^NAME" <<<"$(MANWIDTH=100 man -l "$file" 2>/dev/null)" || bad "$page does not render"
done

for cmd in $commands; do
  file=$docs/man1/cordon-$cmd.1
  [ -s "$file" ] || continue
  # The options of its OPTIONS section, as roff writes them (\-\-name).
  for opt in $(sed -n '/^\.SH OPTIONS/,/^\.SH/p' "$file" | sed -n 's/^\\fB\(.*\)\\fR$/\1/p' | sed 's/\\-/-/g'); do
    [ "$opt" = --help ] && continue
    err=$(setpriv --reuid=65534 --regid=65534 --clear-groups "$cordon" "$cmd" "$opt" --zz-not-an-option 2>&1 >/dev/null |
          head -n 1 || true)
    case $err in
      *"unknown option $opt"*) bad "cordon-$cmd(1) documents $opt, which cordon $cmd does not know: $err" ;;
    esac
  done
done

# Completion, as bash calls it.
complete_line() {
  bash -c '
    source "$1"
    read -ra COMP_WORDS <<< "$2"
    [[ $2 == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    _cordon
    printf "%s\n" "${COMPREPLY[@]}"' _ "$docs/bash/cordon" "$1"
}
expect() {
  local got
  got=$(complete_line "$1" | sort | tr '\n' ' ')
  [ "$got" = "$2 " ] || bad "completing '$1': got '$got', expected '$2 '"
}
expect "cordon ru" "run"
expect "cordon ex" "explain"
expect "cordon run --allow" "--allow-net"
expect "cordon run --fail" "--fail-on-violation"
expect "cordon tail --verdict " "audited denied detected killed noted"
expect "cordon tail --unt" "--until"
expect "cordon explain --access r" "read"
expect "cordon run --mode " "audit enforce"
expect "cordon help do" "doctor"
expect "cordon policy ch" "check"
expect "cordon run -- l" ""
got=$(cd "$docs" && complete_line "cordon run --policy ma")
[ "$got" = "man1" ] || bad "completing a --policy file: got '$got'"
if command -v zsh >/dev/null; then
  zsh -c "source '$docs/zsh/_cordon'" || bad "zsh cannot load _cordon"
fi
[ "$fail" -eq 0 ] && echo "check_docs: ok ($(echo $commands | wc -w) commands)"
exit "$fail"
