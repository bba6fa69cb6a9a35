// `commir-search --plan MODEL --gpus=N ...`: the whole-model plan search's command line
// (search/plan/plan_search.h), a mode of commir-search beside its operator
// search.
#ifndef COMMIR_TOOLS_PLAN_COMMAND_H_
#define COMMIR_TOOLS_PLAN_COMMAND_H_

namespace commir::search {

// Whether the arguments ask for the plan search (one of them is --plan or --plan=...).
bool WantsPlanSearch(int argc, char** argv);

// Runs it. Exit status: 0 success, 1 a bad model, hardware or sweep value, or no plan
// fits on any cluster, 2 bad usage.
int PlanSearchMain(int argc, char** argv);

// Whether the arguments ask for the model as CommIR (one of them is --emit-model=...).
bool WantsEmitModel(int argc, char** argv);

// `commir-search --emit-model=SPEC [--micro-batch=N]`: prints the model description as
// CommIR (search/plan/model_program.h). Exit status: 0 success, 1 a bad model, 2 bad usage.
int EmitModelMain(int argc, char** argv);

}  // namespace commir::search

#endif  // COMMIR_TOOLS_PLAN_COMMAND_H_
