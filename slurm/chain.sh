#!/bin/bash
# Submit a chain of generations with plain sbatch: per generation a self-play array, then a training job
# that depends on it, then the next array on that training. Same dependency scheme as `azhpc launch`
# (docs/pipeline.md): training afterany on the array (plus the minimum-data rule), the next array afterok on
# training, --kill-on-invalid-dep=yes so a failure cancels the rest instead of leaving it pending.
#
#   slurm/chain.sh RUN CONFIG GENERATIONS TASKS
#   e.g. SELFPLAY_OPTS="--partition=gpu" TRAIN_OPTS="--partition=gpu --nodes=2" slurm/chain.sh /shared/r1 configs/cluster.yaml 10 16
#
# AZHPC_PYTHON: the Python of the environment azhpc is installed in (default python3).
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 RUN CONFIG GENERATIONS TASKS" >&2; exit 2; }
RUN=$(realpath -m "$1"); CONFIG=$2; GENERATIONS=$3; TASKS=$4
HERE=$(cd "$(dirname "$0")" && pwd)
PYTHON=${AZHPC_PYTHON:-python3}
"$PYTHON" -m alphazero_hpc.launch.stages init "$RUN" --config "$CONFIG"   # config.yaml and models/gen-0000.pt
after=""
for ((g = 0; g < GENERATIONS; g++)); do
  dep=()
  [ -n "$after" ] && dep=(--dependency="afterok:$after" --kill-on-invalid-dep=yes)
  # shellcheck disable=SC2086  # *_OPTS are lists of sbatch options
  # The job's variables go through the environment (--export=ALL), not --export=RUN=...: a comma in RUN would
  # split that list.
  sp=$(RUN=$RUN GEN=$g NUM_TASKS=$TASKS AZHPC_PYTHON=$PYTHON sbatch --parsable --array="0-$((TASKS - 1))" "${dep[@]}" \
       ${SELFPLAY_OPTS:-} --export=ALL "$HERE/selfplay.sbatch")
  sp=${sp%%;*}
  # shellcheck disable=SC2086
  tr=$(RUN=$RUN GEN=$g AZHPC_PYTHON=$PYTHON sbatch --parsable --dependency="afterany:$sp${after:+,afterok:$after}" \
       --kill-on-invalid-dep=yes ${TRAIN_OPTS:-} --export=ALL "$HERE/train.sbatch")
  tr=${tr%%;*}
  echo "generation $g: self-play array $sp, training $tr"
  after=$tr
done
echo "follow it: azhpc status $RUN"
