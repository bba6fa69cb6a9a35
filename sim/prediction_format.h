// How a Prediction is shown: a text report for people, a JSON report for scripts
// (--format=json) and a Chrome/Perfetto trace of the timeline (one process per device, one
// track per stream). All three are deterministic: the same prediction gives the same bytes.
#ifndef COMMIR_SIM_PREDICTION_FORMAT_H_
#define COMMIR_SIM_PREDICTION_FORMAT_H_

#include <string>

#include "sim/predict.h"

namespace commir::sim {

std::string FormatPredictionText(const Prediction& prediction, const std::string& hardware_name);
std::string FormatPredictionJson(const Prediction& prediction, const std::string& hardware_name);
// The trace-event JSON format (catapult's "Trace Event Format"), times in microseconds.
std::string FormatTimelineTrace(const Prediction& prediction);

}  // namespace commir::sim

#endif  // COMMIR_SIM_PREDICTION_FORMAT_H_
