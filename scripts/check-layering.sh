#!/usr/bin/env bash
# Fails when an include in lib/service points the wrong way between its roles:
#   common/      includes nothing of the other roles;
#   client/      only common/ (it never knows the worker or the dispatcher core);
#   dispatcher/  only common/;  worker/ only common/;  shm/ only common/;
#   metrics/     common/, dispatcher/ and worker/ (it reads the cores), never grpc/ or client/;
# and when any folder of lib/ but lib/service/grpc includes gRPC (grpcpp/, grpc/, grpc++/ or a generated
# *.grpc.pb.h): only grpc/ does (the cores are gRPC-free). Any spacing of `# include` counts.
set -euo pipefail
cd "$(dirname "$0")/.."
include='#[[:space:]]*include[[:space:]]*[<"]'
bad=0
for role in common client dispatcher worker shm; do
  while IFS= read -r line; do
    echo "check-layering: lib/service/$role must not include that: $line" >&2
    bad=1
  done < <(grep -Hn -E "${include}lib/service/(common|client|dispatcher|worker|grpc|metrics|shm)/" lib/service/$role/* |
           grep -v -E "${include}lib/service/($role|common)/" || true)
done
while IFS= read -r line; do
  echo "check-layering: lib/service/metrics must not include that: $line" >&2
  bad=1
done < <(grep -Hn -E "${include}lib/service/(grpc|client)/" lib/service/metrics/* || true)
while IFS= read -r line; do
  echo "check-layering: only lib/service/grpc may include gRPC: $line" >&2
  bad=1
done < <(grep -rHn -E "${include}((grpcpp|grpc|grpc\+\+)/|[^>\"]*\.grpc\.pb\.h[>\"])" lib | grep -v '^lib/service/grpc/' || true)
exit $bad
