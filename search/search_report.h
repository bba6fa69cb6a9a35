// commir-search's output: the ranked candidates as an aligned table (the default), JSON
// or CSV, and the one-line summary of what was searched.
#ifndef COMMIR_SEARCH_SEARCH_REPORT_H_
#define COMMIR_SEARCH_SEARCH_REPORT_H_

#include <string>

#include "search/search.h"

namespace commir::search {

struct ReportContext {
  std::string hardware;
  int64_t devices = 0;
  int64_t gpus_per_node = 0;
};

// "searched @f forward only on 8 devices: 4 meshes, 120 layouts, 960 schedules; 410 duplicates
// merged, 12 not applicable, 0 over memory; 538 candidates ranked in 0.41 s; verified
// 10 of 10 (0 mismatched) in 0.83 s"
std::string FormatSummary(const SearchResult& result, const ReportContext& context);

// Without --train, when the best plan replicates float arguments: "the best plan
// replicates %w1, %w2, and training would add 768.0 KiB per device of gradient
// all_reduce over a (...)"; "" otherwise.
std::string TrainingAdditionText(const SearchResult& result);

// "cut short by the time limit after 120 of 4000 layouts: the best found so far" (when
// stats.cut_short).
std::string CutShortText(const SearchResult& result);

// Columns: rank, mesh, layouts, time, exposed comm, bytes/device, peak memory, verified,
// pipeline (the --pass-pipeline of commir-opt on the laid-out global program).
std::string FormatTable(const SearchResult& result, const ReportContext& context);
std::string FormatJson(const SearchResult& result, const ReportContext& context);
std::string FormatCsv(const SearchResult& result);

// "matched", "MISMATCH", "failed: ...", "-" (not checked).
std::string VerdictText(const Verdict& verdict);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_SEARCH_REPORT_H_
