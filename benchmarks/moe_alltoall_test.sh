#!/bin/bash
# benchmarks/moe_alltoall.md cannot drift from the partitioner: its CommIR cells are
# checked against commir-opt's comm-report of the expert-parallel Mixtral layer and its
# gradient, and its all_to_alls against Megatron-LM's alltoall dispatcher in closed form.
# Usage: moe_alltoall_test.sh PATH/TO/commir-opt
exec /usr/bin/python3 benchmarks/moe_alltoall_check.py "$1"
