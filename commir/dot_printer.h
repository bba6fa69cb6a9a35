// Graphviz rendering of a module's SSA graph (commir-opt --emit=dot):
//  - one cluster per function, labelled with its signature;
//  - a node per function or loop argument (ellipse), per op (box: results, op name,
//    operands, attributes and result types) and per terminator (rounded box);
//  - an edge from each operand's producer to its user (labelled with the result
//    number when the producer has several results; dashed for a stream operand);
//  - each loop body as a cluster nested in its parent, with its induction variable and
//    carried values as nodes, dashed edges from the loop to its carried values and from
//    the yield back to the loop.
// The output is deterministic (nodes are numbered in program order) and every label is
// a quoted, escaped string, so any name or attribute text is safe.
#ifndef COMMIR_COMMIR_DOT_PRINTER_H_
#define COMMIR_COMMIR_DOT_PRINTER_H_

#include <string>

#include "commir/ir.h"

namespace commir {

std::string PrintDot(const Module& module);

}  // namespace commir

#endif  // COMMIR_COMMIR_DOT_PRINTER_H_
