#!/bin/sh
# check_layers.py must refuse what it exists to refuse: on a tree where //search and
# //search/plan depend on each other (the layout before the planner's command line moved
# to tools/) it names the upward edge and the cycle and exits 1; on the same tree with
# the edge removed it exits 0; a test-only target's upward edge is allowed.
set -u
check="$1"
tree="${TEST_TMPDIR:-/tmp}/layers"
rm -rf "$tree"
packages=$(python3 -c "
import importlib.util, sys
spec = importlib.util.spec_from_file_location('c', '$check'); c = importlib.util.module_from_spec(spec)
spec.loader.exec_module(c)
print(' '.join(p or '.' for layer in c.LAYERS for p in layer))")
for p in $packages; do mkdir -p "$tree/$p" && : > "$tree/$p/BUILD"; done
cat > "$tree/search/plan/BUILD" <<'B'
cc_library(name = "plan_search", deps = ["//search:schedule_space", "@absl//:absl"])
B
cat > "$tree/search/BUILD" <<'B'
cc_library(name = "schedule_space", deps = [":mesh_shapes"])
cc_test(name = "t", deps = ["//tools:anything"])
cc_library(name = "plan_command", deps = ["//search/plan:plan_search"])
B
out=$(python3 "$check" "$tree"); rc=$?
echo "$out"
[ $rc -eq 1 ] || { echo "FAIL: exit $rc on a cycle, expected 1"; exit 1; }
echo "$out" | grep -q 'search/BUILD: //search:plan_command -> //search/plan:plan_search' ||
  { echo "FAIL: the upward edge is not named"; exit 1; }
echo "$out" | grep -q 'package cycle: //search -> //search/plan -> //search' ||
  { echo "FAIL: the cycle is not named"; exit 1; }
sed -i '/plan_command/d' "$tree/search/BUILD"
out=$(python3 "$check" "$tree"); rc=$?
[ $rc -eq 0 ] || { echo "$out"; echo "FAIL: exit $rc without the cycle, expected 0"; exit 1; }
echo PASS
