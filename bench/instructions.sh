#!/bin/bash
# Instructions of one cold engine round (ClusterState.from_objects + diagnose, parse caches emptied) on a
# bench/engine.py mix, counted by callgrind: noise-free, so a change's effect shows on a shared, loaded machine
# where wall-clock ratios move by +-10%. Two runs, with one and with two rounds; their difference is one round.
#
#   bash bench/instructions.sh [current|quota|pods] [workloads=2000] [queues=20]    # about 1.5 min per mix
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MIX=${1:-quota}; N=${2:-2000}; QUEUES=${3:-20}
command -v valgrind >/dev/null || { echo "valgrind is needed (apt-get install valgrind)" >&2; exit 2; }
PY=$(python3 -c 'import sys; print(sys.executable)')  # the interpreter itself, not a shim script
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
(cd "$ROOT" && PYTHONPATH=operator "$PY" - "$MIX" "$N" "$QUEUES" "$work/mix.json" <<'PY'
import json, sys
sys.argv, (mix, n, queues, out) = sys.argv[:1], sys.argv[1:]
sys.path[:0] = ["bench", "."]
import engine  # noqa: E402  (bench/engine.py: the mixes)
json.dump(engine.MIXES[mix](int(n), int(queues)), open(out, "w"))
PY
)
for rounds in 1 2; do cat > "$work/run$rounds.py" <<PY
import json, sys
sys.path.insert(0, "$ROOT/operator")
from datetime import UTC, datetime
from kueue_doctor.engine import clear_parse_caches
from kueue_doctor.engine.diagnose import diagnose
from kueue_doctor.state import ClusterState
objs = json.load(open("$work/mix.json"))
for _ in range($rounds):
    clear_parse_caches()
    diagnose(ClusterState.from_objects(objs), datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC))
PY
done
count() { PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file="$work/cg.$1" "$PY" "$work/run$1.py" 2>&1 |
  sed -n 's/.*Collected : \([0-9]*\).*/\1/p'; }
one=$(count 1); two=$(count 2)
echo "$MIX: one cold engine round on $N Workloads ($QUEUES ClusterQueues): $(( (two - one) / 1000000 ))M instructions"
