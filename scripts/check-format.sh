#!/usr/bin/env bash
# Fails when clang-format (Debian 12's, version 14, with .clang-format) would change a C/C++ file.
# To fix: clang-format -i $(git ls-files '*.h' '*.cc' '*.c')
set -euo pipefail
cd "$(dirname "$0")/.."
if git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.h' '*.cc' '*.c')
else
  mapfile -t files < <(find cmd lib tests python bench examples -name '*.h' -o -name '*.cc' -o -name '*.c')
fi
if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/check-format.$$; then
  head -40 /tmp/check-format.$$ >&2
  echo "check-format: $(grep -c 'error:' /tmp/check-format.$$) place(s) differ from .clang-format;" \
       "run clang-format -i on the files named above" >&2
  rm -f /tmp/check-format.$$
  exit 1
fi
rm -f /tmp/check-format.$$
