#!/bin/bash
# benchmarks/vocab_parallel_comm.md cannot drift from the partitioner: its CommIR cells
# are checked against commir-opt's comm-report, its Megatron-LM cells against the
# collectives Megatron-LM issues for the same sizes, and the two against each other.
# Usage: vocab_parallel_comm_test.sh PATH/TO/commir-opt
exec /usr/bin/python3 benchmarks/vocab_parallel_comm_check.py "$1"
