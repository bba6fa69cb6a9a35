// The spmd check (lower a global program, run it on the cpu mesh, compare with the
// one-device run) lives in search/spmd_check.h, where the search's verification, which
// is not test-only, uses it too; the partitioner and schedule tests include it from here.
#ifndef COMMIR_TESTING_SPMD_CHECK_H_
#define COMMIR_TESTING_SPMD_CHECK_H_

#include "search/spmd_check.h"

#endif  // COMMIR_TESTING_SPMD_CHECK_H_
