#include "sim/prediction_format.h"

#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace commir::sim {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Prediction TwoDevices() {
  Prediction p;
  p.time_s = 2e-3;
  p.overlap_fraction = 0.5;
  p.total_flops = 4e12;
  p.achieved_tflops_per_gpu = 1000;
  p.fraction_of_peak = 0.25;
  p.devices = {{2e-3, 1.5e-3, 1e-3, 0.5e-3, 3 * 1024 * 1024}, {1e-3, 1e-3, 0, 0, 1024 * 1024}};
  p.timeline = {{1, 0, "matmul", 0, 1000, false},
                {0, 1, "all_gather", 0, 1000, true},
                {0, 0, "matmul", 500, 2000, false}};
  return p;
}

TEST(PredictionFormatTest, TextNamesEveryFigure) {
  std::string text = FormatPredictionText(TwoDevices(), "h100-sxm");
  EXPECT_THAT(text, HasSubstr("h100-sxm, 2 devices"));
  EXPECT_THAT(text, HasSubstr("predicted time: 2.0000 ms"));
  EXPECT_THAT(text, HasSubstr("50.0%"));
  EXPECT_THAT(text, HasSubstr("25.0% of peak"));
  EXPECT_THAT(text, HasSubstr("\n     0       2.0000       1.5000       1.0000       0.5000            3.0"));
  EXPECT_EQ(text, FormatPredictionText(TwoDevices(), "h100-sxm"));
}

TEST(PredictionFormatTest, AttentionPricedAtTheAverageMaskIsSaid) {
  Prediction p = TwoDevices();
  EXPECT_THAT(FormatPredictionText(p, "h100-sxm"), Not(HasSubstr("average mask")));
  EXPECT_THAT(FormatPredictionJson(p, "h100-sxm"), Not(HasSubstr("attention_positions_unknown")));
  p.attention_positions_unknown = 3;
  EXPECT_THAT(FormatPredictionText(p, "h100-sxm"),
              HasSubstr("note: 3 causal attention kernels priced at the average mask"));
  EXPECT_THAT(FormatPredictionJson(p, "h100-sxm"), HasSubstr("\"attention_positions_unknown\": 3"));
}

TEST(PredictionFormatTest, NoCommunicationIsSaidRatherThanAFraction) {
  Prediction p = TwoDevices();
  for (DevicePrediction& d : p.devices) d.communication_s = d.exposed_communication_s = 0;
  p.overlap_fraction = 1;  // what Predict reports when there is none
  std::string text = FormatPredictionText(p, "h100-sxm");
  EXPECT_THAT(text, HasSubstr("\ncommunication: none\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("hidden under compute")));
  EXPECT_THAT(FormatPredictionText(TwoDevices(), "h100-sxm"),
              HasSubstr("communication hidden under compute: 50.0%\n"));
}

// The streamed trace is the same JSON document as the whole one.
TEST(PredictionFormatTest, StreamedTraceInPiecesIsTheWholeTrace) {
  std::vector<std::string> pieces;
  TimelineTraceWriter writer([&](std::string_view piece) { pieces.emplace_back(piece); });
  for (const TimelineEvent& e : TwoDevices().timeline) writer.Add(e);
  writer.Finish();
  std::string joined;
  for (const std::string& piece : pieces) joined += piece;
  EXPECT_GT(pieces.size(), 3u);
  EXPECT_EQ(joined, FormatTimelineTrace(TwoDevices()));
  nlohmann::json trace = nlohmann::json::parse(joined);
  EXPECT_EQ(trace["traceEvents"].size(), 3u + 2 + 3);  // slices, processes, tracks
}

TEST(PredictionFormatTest, JsonRoundTripsTheNumbers) {
  nlohmann::json json = nlohmann::json::parse(FormatPredictionJson(TwoDevices(), "h200"));
  EXPECT_EQ(json["hardware"], "h200");
  EXPECT_DOUBLE_EQ(json["time_s"].get<double>(), 2e-3);
  ASSERT_EQ(json["devices"].size(), 2u);
  EXPECT_DOUBLE_EQ(json["devices"][0]["exposed_communication_s"].get<double>(), 0.5e-3);
  EXPECT_EQ(json["devices"][1]["peak_memory_bytes"].get<int64_t>(), 1024 * 1024);
}

TEST(PredictionFormatTest, TraceHasOneProcessPerDeviceAndOneTrackPerStream) {
  nlohmann::json trace = nlohmann::json::parse(FormatTimelineTrace(TwoDevices()));
  int processes = 0, threads = 0, slices = 0;
  for (const nlohmann::json& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") ++processes;
    if (e["ph"] == "M" && e["name"] == "thread_name") ++threads;
    if (e["ph"] == "X") {
      ++slices;
      if (e["name"] == "all_gather") {
        EXPECT_EQ(e["pid"], 0);
        EXPECT_EQ(e["tid"], 1);
        EXPECT_EQ(e["cat"], "communication");
        EXPECT_DOUBLE_EQ(e["dur"].get<double>(), 1000);
      }
    }
  }
  EXPECT_EQ(processes, 2);
  EXPECT_EQ(threads, 3);  // device 0 streams 0 and 1, device 1 stream 0
  EXPECT_EQ(slices, 3);
}

}  // namespace
}  // namespace commir::sim
