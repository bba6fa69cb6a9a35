#!/bin/bash
# benchmarks/megatron_collectives.md cannot drift from the partitioner: its CommIR cells
# are checked against commir-opt's comm-report of the shared block's gradient function,
# and CommIR's all_gathers and reduce_scatters against Megatron-LM TP+SP's.
# Usage: megatron_collectives_test.sh PATH/TO/commir-opt
exec /usr/bin/python3 benchmarks/megatron_collectives_check.py "$1"
