#!/usr/bin/env bash
# The command line at its defaults (README, "Right by default"): ATMC against
# the SGD/MAP baseline on the four bundled datasets, seeds 0 and 1; the ATMC
# run is evaluated with the SGD run as --baseline-run-dir, which prints the
# paired test-NLL difference and its standard error.
# Usage: bash benchmarks/cli_defaults.sh [output root, default runs/cli-defaults]
# (SEEDS, DATASETS and SAMPLERS narrow the grid, e.g. SEEDS=1 DATASETS=wine, or
# SAMPLERS=atmc to retrain only the chains against SGD runs already under the
# root; EVALUATE_ONLY=1 re-evaluates runs already trained under the root;
# CHAINS=4 trains the sampler's run as 4 chains, PROCESSES of them at once,
# default 2: the README's four-chain table)
set -euo pipefail
cd "$(dirname "$0")/.."
root=${1:-runs/cli-defaults}
py=${PYTHON:-.venv/bin/python}
for seed in ${SEEDS:-0 1}; do
  for dataset in ${DATASETS:-digits breast_cancer wine diabetes}; do
    for sampler in ${SAMPLERS:-sgd atmc}; do
      out=$root/$dataset-$sampler-$seed
      chains=()
      if [ "$sampler" != sgd ] && [ "${CHAINS:-1}" != 1 ]; then
        chains=(--chains "$CHAINS" --processes "${PROCESSES:-2}")
      fi
      if [ -z "${EVALUATE_ONLY:-}" ]; then
        start=$SECONDS
        $py -m keras_bnn.cli train --dataset "$dataset" --sampler "$sampler" --seed "$seed" \
          "${chains[@]}" --output-dir "$out" --verbose 0 2>/dev/null | grep "step size\|^prior" || true
        echo "$sampler: $((SECONDS - start)) s of wall time (with the prior selection)"
      fi
    done
    echo "== $dataset seed $seed (atmc ensemble against the sgd baseline)"
    $py -m keras_bnn.cli evaluate --run-dir "$root/$dataset-atmc-$seed" \
      --baseline-run-dir "$root/$dataset-sgd-$seed" 2>/dev/null | sed -n 1,13p  # to R-hat/ESS
  done
done
