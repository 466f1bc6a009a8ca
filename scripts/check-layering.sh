#!/usr/bin/env bash
# Fails when an include in lib/service points the wrong way between its roles:
#   common/      includes nothing of the other roles;
#   client/      only common/ (it never knows the worker or the dispatcher core);
#   dispatcher/  only common/;  worker/ only common/;
#   and none of them includes gRPC: only grpc/ does (the cores are gRPC-free).
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
for role in common client dispatcher worker; do
  while IFS= read -r line; do
    echo "check-layering: lib/service/$role must not include that: $line" >&2
    bad=1
  done < <(grep -Hn -E '#include [<"](grpcpp/|grpc/|lib/service/(common|client|dispatcher|worker|grpc)/)' lib/service/$role/* |
           grep -v -E "#include \"lib/service/($role|common)/" || true)
done
exit $bad
