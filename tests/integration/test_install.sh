#!/usr/bin/env bash
# Installed without root: `cmake --install BUILD --prefix DIR` gives a tree that works from any
# path. It is installed, moved elsewhere, and run with the build tree off PATH and PYTHONPATH:
# hpo starts the hpod next to it, which runs trials under the hpo-shim next to it; the quickstart
# example from share/ runs; the Python package from lib/python3/dist-packages talks to the
# daemon; `hpo plot` finds it on its own. `cpack -G DEB` packs the same tree for /usr with the
# shared libraries' packages and the Python client's as dependencies.
source "$(dirname "$0")/lib.sh"
BUILD=$(dirname "$HPO_BIN")
cmake --install "$BUILD" --prefix "$WORK/first" >/dev/null
mv "$WORK/first" "$WORK/moved"
P=$WORK/moved
export PATH="$P/bin:/usr/sbin:/usr/bin:/sbin:/bin"
unset PYTHONPATH
[ "$(command -v hpo)" = "$P/bin/hpo" ] || fail "hpo on PATH is $(command -v hpo)"
for f in bin/hpod bin/hpo bin/hpo-shim lib/python3/dist-packages/hpo/client.py lib/python3/dist-packages/hpo/v1/hpo_pb2.py \
  share/hpod/examples/quickstart.yaml share/hpod/examples/train_spiral.py share/doc/hpod/docs/operations.md; do
  [ -e "$P/$f" ] || fail "the install lacks $f"
done
sed -e 's/max_trials: 20/max_trials: 2/' -e 's/max_concurrent: 4/max_concurrent: 2/' -e 's/  epochs: 25/  epochs: 3/' \
  "$P/share/hpod/examples/quickstart.yaml" >"$P/share/hpod/examples/small.yaml"
id=$(hpo submit "$P/share/hpod/examples/small.yaml" | tail -n 1)
[ "$(readlink "/proc/$(cat "$HPO_DATA_DIR/hpod.pid")/exe")" = "$P/bin/hpod" ] || fail "the daemon is not the installed hpod"
hpo wait "$id" --timeout 120 >/dev/null || fail "the installed quickstart did not complete: $(hpo trials "$id")"
[ "$(sql "SELECT COUNT(*) FROM trials WHERE sweep_id=$id AND state='TRIAL_STATE_COMPLETED'")" -eq 2 ] || fail "2 trials should complete"
grep -q "^exit 0" "$HPO_DATA_DIR/sweeps/$id/trials/00000/hpo.exit" || fail "the trial did not run under the installed hpo-shim"
PYTHONPATH="$P/lib/python3/dist-packages" $PY - "$id" "$P" <<'PYEOF' || fail "the installed Python client"
import sys, hpo
assert hpo.__file__.startswith(sys.argv[2]), hpo.__file__
st = hpo.Client().sweep(int(sys.argv[1])).status()
assert st["state"] == "COMPLETED", st
PYEOF
hpo plot "$id" --kind objective -o "$WORK/objective.png" >/dev/null || fail "hpo plot from the install"
[ -s "$WORK/objective.png" ] || fail "hpo plot wrote nothing"
pass "an install moved to another path runs the quickstart, its Python client and hpo plot, with the build tree off PATH"

mkdir "$WORK/pack"
(cd "$WORK/pack" && cpack -G DEB --config "$BUILD/CPackConfig.cmake" >/dev/null) || fail "cpack -G DEB failed"
deb=$(ls "$WORK"/pack/hpod_*.deb)
depends=$(dpkg-deb -f "$deb" Depends)
for want in python3-grpcio libgrpc libprotobuf libsqlite3 libyaml-cpp libcpp-httplib libprometheus-cpp; do
  echo "$depends" | has "$want" || fail "the package does not depend on $want: $depends"
done
dpkg-deb -c "$deb" >"$WORK/contents"
for f in ./usr/bin/hpod ./usr/bin/hpo ./usr/bin/hpo-shim ./usr/lib/python3/dist-packages/hpo/client.py ./usr/share/hpod/examples/quickstart.yaml; do
  grep -q " $f\$" "$WORK/contents" || fail "the package lacks $f"
done
pass "cpack -G DEB: $(basename "$deb") with Depends: $depends"
