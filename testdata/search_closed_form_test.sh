#!/bin/bash
# The search goldens' throughput, MFU, time breakdown, exposed communication and compute
# against published closed forms (search_closed_form_check.py and search_operator_check.py
# say which), then hand-edited copies of the operator goldens, each of which must fail.
set -u
checker=testdata/search_closed_form_check.py
/usr/bin/python3 "$checker" testdata/search || exit 1

tmp=$(mktemp -d "${TEST_TMPDIR:-/tmp}/closed_form.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failed=0
# golden, sed edit, what the edit breaks.
while IFS='|' read -r golden edit why; do
  rm -rf "$tmp/search"
  cp -rL testdata/search "$tmp/search"
  chmod -R u+w "$tmp/search"
  sed -i "$edit" "$tmp/search/$golden"
  if cmp -s "testdata/search/$golden" "$tmp/search/$golden"; then
    echo "FAIL: the edit '$edit' changed nothing in $golden"; failed=1; continue
  fi
  if /usr/bin/python3 "$checker" "$tmp/search" >"$tmp/out" 2>&1; then
    echo "FAIL: $golden with '$edit' ($why) passed the closed-form check"; failed=1
  else
    echo "ok: $golden with '$edit' fails:"
    grep '^FAIL' "$tmp/out" | head -3
  fi
done <<'EDITS'
mlp.golden|s/1.34833388e-05/1.44833388e-05/|exposed all_reduce 7% off NCCL's ring model
mlp.golden|s/,262144,655360,/,131072,655360,/|bytes of one all_gather instead of an all_reduce
calls_inlined.golden|s/3.8061625e-05,0,/1e-08,0,/|time below the datasheet compute bound
train_mlp.golden|0,/3.87925277e-05/s//3.97925277e-05/|forward + backward no longer the time
train_mlp.golden|0,/1.87250081e-05/s//3.74500163e-05/|y and dx all_reduced apart, not in one bucket
renamed_meshes.golden|s/5.45797385e-05/2.95797385e-05/|cross-node row faster than its in-node twin
renamed_meshes_one_node.golden|3s/1.88037495e-05/1.88037496e-05/|same placement, different time
renamed_meshes.golden|s/5.45797385e-05,3.58297872e-05/2.87499513e-05,1.0e-05/|cross-node all_reduce faster than NVLink
zigzag_attention.golden|s/,5.74996505e-05,32768,/,5.74996505e-05,16384,/|the k/v gathers without the zigzag exchanges
zigzag_attention.golden|s/0.000155273092,5.74996505e-05/0.000127773442,3.0e-05/|communication below the links' bound
zigzag_attention.golden|s/,5.81225164e-05,32768,/,5.81225164e-05,0,/|communication time with no bytes
train_mlp.golden|0,/0.000115344024\(.*\),7.65514961e-05/s//3.88025277e-05\1,1e-08/|backward faster than its FLOPs at peak
zigzag_attention.golden|s/0.000155273092,5.74996505e-05/5.0e-05,5.74996505e-05/|exposed longer than the time
EDITS
exit $failed
