// `commir-search --plan MODEL --gpus=N ...`: the whole-model plan search's command line
// (issue 15; search/plan/plan_search.h), a mode of commir-search beside its operator
// search.
#ifndef COMMIR_SEARCH_PLAN_COMMAND_H_
#define COMMIR_SEARCH_PLAN_COMMAND_H_

namespace commir::search {

// Whether the arguments ask for the plan search (one of them is --plan or --plan=...).
bool WantsPlanSearch(int argc, char** argv);

// Runs it. Exit status: 0 success, 1 a bad model, hardware or sweep value, or no plan
// fits on any cluster, 2 bad usage.
int PlanSearchMain(int argc, char** argv);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_PLAN_COMMAND_H_
