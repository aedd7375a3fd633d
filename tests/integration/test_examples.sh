#!/usr/bin/env bash
# Every example sweep validates and has a plan (`hpo plan`, with --pilot where the file does not
# say how long a trial is), and there is one for every algorithm and every stopper hpod knows
# (the names come from `hpo validate` errors, so a new one without an example fails here).
# The unknown-command rule of the CLI is checked on the way: exit 2, nothing run.
source "$(dirname "$0")/lib.sh"
# This daemon has no Slurm (no slurm.conf here): a sweep with a slurm: section is refused for that
# reason alone, which hpod gives only for a file that parsed.
export SLURM_CONF=$WORK/no-such-slurm.conf
hpo daemon start --cpus 8 --gpus 4 >/dev/null
: >"$WORK/used"
for f in "$HPO_SRC"/examples/*.yaml; do
  if grep -q '^slurm:' "$f"; then
    if hpo validate "$f" >"$WORK/out" 2>&1; then fail "$(basename "$f") validated without Slurm"; fi
    grep -q "backend: the sweep runs on slurm, but this hpod has no slurm backend: no slurm.conf" "$WORK/out" ||
      fail "$(basename "$f"): unclear refusal: $(cat "$WORK/out")"
    continue
  fi
  hpo validate "$f" >"$WORK/out" 2>&1 || fail "$(basename "$f") does not validate: $(cat "$WORK/out")"
  sed -n 's/^algorithm: \([a-z0-9]*\).*/algorithm \1/p; s/^early stopping: \([a-z]*\).*/stopper \1/p' "$WORK/out" >>"$WORK/used"
  # A plan, from the file alone or, where it does not say how long a trial is, from its pilot
  # (which then runs one trial to its end).
  if ! (cd "$HPO_SRC/examples" && hpo plan "$(basename "$f")") >"$WORK/plan" 2>&1; then
    grep -q "how many steps a trial reports is not known" "$WORK/plan" ||
      fail "hpo plan $(basename "$f"): $(cat "$WORK/plan")"
    (cd "$HPO_SRC/examples" && hpo plan "$(basename "$f")" --pilot) >"$WORK/plan" 2>&1 ||
      fail "hpo plan $(basename "$f") --pilot: $(cat "$WORK/plan")"
    grep -q "and 1 to its end (a trial's length is not known)" "$WORK/plan" ||
      fail "the pilot of $(basename "$f") did not run a trial to its end: $(cat "$WORK/plan")"
    grep -q "step(s) a trial (sweep [0-9]*'s completed trials)" "$WORK/plan" ||
      fail "the plan of $(basename "$f") did not learn a trial's length: $(cat "$WORK/plan")"
    echo "$(basename "$f"): planned from its pilot"
  fi
  grep -Eq "^  trials +[0-9]" "$WORK/plan" || fail "hpo plan $(basename "$f"): $(cat "$WORK/plan")"
done
known() {  # the names hpod lists for an unknown value of section $1
  printf 'parameters: {x: [1]}\nobjective: {metric: m, direction: min}\ncommand: t\n%s: {name: nosuch}\n' "$1" >"$WORK/bad.yaml"
  hpo validate "$WORK/bad.yaml" 2>&1 | sed -n 's/.*(known: \(.*\)).*/\1/p' | tr -d ' ' | tr ',' '\n'
}
for name in $(known algorithm); do
  grep -qx "algorithm $name" "$WORK/used" || fail "no example uses algorithm '$name'"
done
for name in $(known early_stopping); do
  grep -qx "stopper $name" "$WORK/used" || fail "no example uses early_stopping '$name'"
done
if hpo nosuch 1 --help >"$WORK/out" 2>&1; then fail "an unknown command succeeded"; fi
set +e
hpo nosuch 1 --help >/dev/null 2>&1
rc=$?
set -e
[ "$rc" -eq 2 ] || fail "an unknown command exited $rc, not 2"
grep -q "unknown command 'nosuch'" "$WORK/out" || fail "unclear: $(cat "$WORK/out")"
pass "every example validates and plans (those on Slurm are refused for the want of it); every algorithm and stopper has one; unknown commands exit 2"
