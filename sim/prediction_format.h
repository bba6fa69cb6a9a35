// How a Prediction is shown: a text report for people, a JSON report for scripts
// (--format=json) and a Chrome/Perfetto trace of the timeline (one process per device, one
// track per stream). All three are deterministic: the same prediction gives the same bytes.
#ifndef COMMIR_SIM_PREDICTION_FORMAT_H_
#define COMMIR_SIM_PREDICTION_FORMAT_H_

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "sim/predict.h"

namespace commir::sim {

std::string FormatPredictionText(const Prediction& prediction, const std::string& hardware_name);
std::string FormatPredictionJson(const Prediction& prediction, const std::string& hardware_name);
// The trace-event JSON format (catapult's "Trace Event Format"), times in microseconds.
std::string FormatTimelineTrace(const Prediction& prediction);

// The same trace written as the events come (a long run's trace is never held whole):
// each device's and stream's name just before its first event, then the event. `write`
// gets the text in pieces, in order.
class TimelineTraceWriter {
 public:
  explicit TimelineTraceWriter(std::function<void(std::string_view)> write);
  void Add(const TimelineEvent& event);
  // Closes the JSON document; call once, after the last Add.
  void Finish();

 private:
  void Emit(const std::string& json);
  std::function<void(std::string_view)> write_;
  std::set<std::pair<int64_t, int64_t>> tracks_;
  std::set<int64_t> devices_;
  bool first_ = true;
};

}  // namespace commir::sim

#endif  // COMMIR_SIM_PREDICTION_FORMAT_H_
