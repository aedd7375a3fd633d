#!/usr/bin/env bash
# Sets everything up, then runs the quickstart sweep on the local backend with the live table
# and prints the best configuration. Data goes to $HPO_DATA_DIR (default: a fresh temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/build/bin:$PATH"
export HPO_DATA_DIR=${HPO_DATA_DIR:-$(mktemp -d /tmp/hpo-demo.XXXXXX)}
echo "demo: data in $HPO_DATA_DIR"
# Four trials at a time even on a 2-core machine: the example is tiny.
hpo daemon start --cpus 4
hpo validate examples/quickstart.yaml
sweep=$(hpo submit examples/quickstart.yaml | tail -n 1)
hpo watch "$sweep"          # the live table, until the sweep ends
echo
hpo best "$sweep"
hpo daemon stop
