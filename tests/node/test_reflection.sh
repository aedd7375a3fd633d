#!/usr/bin/env bash
# Standard tooling: Node's grpc-js with a reflection client from npm (installed into the build
# tree) lists hpod's services over TLS, calls ListSweeps, and sees the health service SERVING.
source "$(dirname "$0")/../integration/lib.sh"
NODE_DIR=${HPO_NODE_DIR:-$HPO_BIN/../node-test}
mkdir -p "$NODE_DIR"
cp "$HPO_SRC/tests/node/package.json" "$HPO_SRC/tests/node/reflection_test.js" "$NODE_DIR/"
if [ ! -d "$NODE_DIR/node_modules/grpc-js-reflection-client" ]; then
  (cd "$NODE_DIR" && npm install --no-audit --no-fund --loglevel=error >/dev/null) || fail "npm install failed"
fi
hpo daemon start >/dev/null
printf 'name: for-node\ncommand: "true"\nparameters: {x: [1]}\nobjective: {metric: m, direction: max}\nalgorithm: grid\n' >"$WORK/s.yaml"
id=$(hpo submit "$WORK/s.yaml" | tail -n 1)
hpo wait "$id" >/dev/null
HPO_ENDPOINT=$(cat "$HPO_DATA_DIR/endpoint") HPO_TOKEN=$(cat "$HPO_DATA_DIR/token") HPO_TLS_CA=$HPO_DATA_DIR/tls-ca.pem \
  node "$NODE_DIR/reflection_test.js" || fail "the Node reflection client failed"
pass "grpc-js + reflection: services listed, ListSweeps answered, health SERVING"
