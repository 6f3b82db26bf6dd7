#!/usr/bin/env bash
# The command line at its defaults (README, "Right by default"): ATMC against
# the SGD/MAP baseline on the four bundled datasets, seeds 0 and 1.
# Usage: bash benchmarks/cli_defaults.sh [output root, default runs/cli-defaults]
# (SEEDS, DATASETS and SAMPLERS narrow the grid, e.g. SEEDS=1 DATASETS=wine)
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-runs/cli-defaults}
py=${PYTHON:-.venv/bin/python}
for seed in ${SEEDS:-0 1}; do
  for dataset in ${DATASETS:-digits breast_cancer wine diabetes}; do
    for sampler in ${SAMPLERS:-atmc sgd}; do
      out=$root/$dataset-$sampler-$seed
      $py -m keras_bnn.cli train --dataset "$dataset" --sampler "$sampler" --seed "$seed" \
        --output-dir "$out" --verbose 0 2>/dev/null | grep "step size\|^prior" || true
      echo "== $dataset $sampler seed $seed"
      $py -m keras_bnn.cli evaluate --run-dir "$out" 2>/dev/null | sed -n 1,4p
    done
  done
done
