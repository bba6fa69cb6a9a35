// The interpreter's side of the Backend seam: which device and stream each op instance
// names, which devices run when a process drives only some of them, what a collective's
// context holds, and that device-resident backends get inputs and results moved.
#include "runtime/interpreter.h"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "commir/diagnostics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/backend.h"
#include "runtime/tensor.h"

namespace commir::runtime {
namespace {

using ::testing::ElementsAre;

// Records every call; ops return a copy of their first tensor operand (or a zero f32[2]
// for `full`), collectives return each local part unchanged.
class RecordingBackend : public Backend {
 public:
  struct OpCall {
    std::string op;
    int64_t device;
    int64_t stream;
  };
  std::vector<OpCall> ops;
  std::vector<CollectiveContext> collectives;
  bool device_memory = false;
  int to_device = 0, to_host = 0;

  absl::string_view name() const override { return "recording"; }
  bool uses_device_memory() const override { return device_memory; }
  absl::StatusOr<std::vector<Tensor>> RunOp(const Operation& op, const OpContext& context,
                                            absl::Span<const Tensor* const> tensors,
                                            absl::Span<const int64_t>) override {
    ops.push_back({std::string(op.name()), context.device, context.stream});
    if (tensors.empty()) return std::vector<Tensor>{Tensor(ElementType::kF32, {2})};
    return std::vector<Tensor>{*tensors[0]};
  }
  absl::StatusOr<std::vector<Tensor>> RunCollective(const Operation&,
                                                    const CollectiveContext& context,
                                                    absl::Span<const Tensor* const> parts) override {
    collectives.push_back(context);
    std::vector<Tensor> out;
    for (const Tensor* part : parts) out.push_back(*part);
    return out;
  }
  absl::StatusOr<Tensor> ToDevice(int64_t, const Tensor& host) override {
    ++to_device;
    return host;
  }
  absl::StatusOr<Tensor> ToHost(const Tensor& value) override {
    ++to_host;
    return value;
  }
};

std::unique_ptr<Module> Parse(const std::string& source) {
  DiagnosticEngine diagnostics;
  std::unique_ptr<Module> module = ParseModule(source, diagnostics);
  EXPECT_NE(module, nullptr) << source;
  return module;
}

constexpr char kProgram[] =
    "mesh @m(dp=2, tp=2)\n"
    "spmd func @f(%x: f32[4@(dp, tp)]) -> f32[4@(dp, tp)] {\n"
    "  %r = rank() {axis = tp}\n"
    "  %a = neg(%x) {stream = %r}\n"
    "  %b = all_gather(%a) {axis = tp, dim = 0, stream = 2} : f32[2]\n"
    "  %c = slice(%b) {start = [0], size = [1]} : f32[1]\n"
    "  return %c\n"
    "}\n";

std::vector<std::vector<Tensor>> Inputs(int64_t devices) {
  return std::vector<std::vector<Tensor>>(devices, {Tensor(ElementType::kF32, {1})});
}

TEST(InterpreterTest, OpsNameTheirDeviceAndStream) {
  std::unique_ptr<Module> module = Parse(kProgram);
  ASSERT_NE(module, nullptr);
  RecordingBackend backend;
  Interpreter interpreter(*module->functions()[0], backend);
  ASSERT_TRUE(interpreter.Run(Inputs(4)).ok());
  // neg runs on every device, on the stream given by its tp coordinate.
  std::vector<std::pair<int64_t, int64_t>> negs;
  for (const auto& call : backend.ops) {
    if (call.op == "neg") negs.emplace_back(call.device, call.stream);
  }
  EXPECT_THAT(negs, ElementsAre(std::pair<int64_t, int64_t>{0, 0}, std::pair<int64_t, int64_t>{1, 1},
                                std::pair<int64_t, int64_t>{2, 0}, std::pair<int64_t, int64_t>{3, 1}));
  // One all_gather per tp group, with every member local.
  ASSERT_EQ(backend.collectives.size(), 2u);
  EXPECT_THAT(backend.collectives[0].group, ElementsAre(0, 1));
  EXPECT_THAT(backend.collectives[0].local, ElementsAre(0, 1));
  EXPECT_THAT(backend.collectives[0].streams, ElementsAre(2, 2));
  EXPECT_THAT(backend.collectives[1].group, ElementsAre(2, 3));
  EXPECT_EQ(backend.to_device, 0);  // host tensors are used as they are
}

TEST(InterpreterTest, LocalDevicesRestrictExecutionAndCollectiveParts) {
  std::unique_ptr<Module> module = Parse(kProgram);
  ASSERT_NE(module, nullptr);
  RecordingBackend backend;
  Interpreter interpreter(*module->functions()[0], backend);
  ASSERT_TRUE(interpreter.set_local_devices({1, 3}).ok());
  std::vector<std::vector<Tensor>> inputs(4);
  inputs[1] = {Tensor(ElementType::kF32, {1})};
  inputs[3] = {Tensor(ElementType::kF32, {1})};
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(inputs);
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  for (const auto& call : backend.ops) {
    EXPECT_TRUE(call.device == 1 || call.device == 3) << call.op << " on " << call.device;
  }
  ASSERT_EQ(backend.collectives.size(), 2u);
  // Device 1 is position 1 of group {0, 1}; device 3 position 1 of {2, 3}.
  EXPECT_THAT(backend.collectives[0].group, ElementsAre(0, 1));
  EXPECT_THAT(backend.collectives[0].local, ElementsAre(1));
  EXPECT_THAT(backend.collectives[1].group, ElementsAre(2, 3));
  EXPECT_THAT(backend.collectives[1].local, ElementsAre(1));
  EXPECT_TRUE((*outputs)[0].empty());
  EXPECT_EQ((*outputs)[1].size(), 1u);
  EXPECT_TRUE((*outputs)[2].empty());
  EXPECT_EQ((*outputs)[3].size(), 1u);
}

TEST(InterpreterTest, RejectsBadLocalDeviceLists) {
  std::unique_ptr<Module> module = Parse(kProgram);
  ASSERT_NE(module, nullptr);
  RecordingBackend backend;
  Interpreter interpreter(*module->functions()[0], backend);
  EXPECT_FALSE(interpreter.set_local_devices({}).ok());
  EXPECT_FALSE(interpreter.set_local_devices({4}).ok());
  EXPECT_FALSE(interpreter.set_local_devices({2, 1}).ok());
  EXPECT_FALSE(interpreter.set_local_devices({1, 1}).ok());
  EXPECT_TRUE(interpreter.set_local_devices({0, 2}).ok());
  EXPECT_THAT(interpreter.local_devices(), ElementsAre(0, 2));
}

TEST(InterpreterTest, DeviceBackendsGetInputsInAndResultsOut) {
  std::unique_ptr<Module> module = Parse(kProgram);
  ASSERT_NE(module, nullptr);
  RecordingBackend backend;
  backend.device_memory = true;
  Interpreter interpreter(*module->functions()[0], backend);
  ASSERT_TRUE(interpreter.Run(Inputs(4)).ok());
  EXPECT_EQ(backend.to_device, 4);  // one argument on each of 4 devices
  EXPECT_EQ(backend.to_host, 4);    // one result on each
}

TEST(InterpreterTest, BackendErrorCodesSurvive) {
  class Failing : public RecordingBackend {
    absl::StatusOr<std::vector<Tensor>> RunOp(const Operation&, const OpContext&,
                                              absl::Span<const Tensor* const>,
                                              absl::Span<const int64_t>) override {
      return absl::ResourceExhaustedError("out of memory on GPU 0");
    }
  };
  std::unique_ptr<Module> module = Parse(kProgram);
  ASSERT_NE(module, nullptr);
  Failing backend;
  Interpreter interpreter(*module->functions()[0], backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(Inputs(4));
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(outputs.status().message()), ::testing::HasSubstr("'neg'"));
  EXPECT_EQ(interpreter.error_location().line, 4);
}


// A backend that gives up after `limit` ops, so that a runaway loop fails the test
// instead of hanging it.
class CountingBackend : public RecordingBackend {
 public:
  explicit CountingBackend(int limit) : limit_(limit) {}
  absl::StatusOr<std::vector<Tensor>> RunOp(const Operation& op, const OpContext& context,
                                            absl::Span<const Tensor* const> tensors,
                                            absl::Span<const int64_t> indices) override {
    if (static_cast<int>(ops.size()) >= limit_) return absl::InternalError("runaway loop");
    return RecordingBackend::RunOp(op, context, tensors, indices);
  }

 private:
  int limit_;
};

// The number of body iterations of a one-op loop from `lower` to `upper` by `step`.
absl::StatusOr<int> LoopTrips(const std::string& lower, const std::string& upper,
                              const std::string& step) {
  std::unique_ptr<Module> module = Parse(absl::StrCat(
      "mesh @m(dp=1)\n"
      "spmd func @f(%x: f32[1]) -> f32[1] {\n"
      "  %r = for %i = ", lower, " to ", upper, " step ", step, " iter(%a = %x) {\n"
      "    %b = neg(%a)\n"
      "    yield %b\n"
      "  } : (f32[1])\n"
      "  return %r\n"
      "}\n"));
  if (module == nullptr) return absl::InvalidArgumentError("does not parse");
  CountingBackend backend(16);
  Interpreter interpreter(*module->functions()[0], backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(Inputs(1));
  if (!outputs.ok()) return outputs.status();
  return static_cast<int>(backend.ops.size());
}

TEST(InterpreterTest, LoopsNearTheIntegerLimitsEnd) {
  // i += step would overflow past the upper bound: the trip count is computed instead.
  EXPECT_EQ(LoopTrips("9223372036854775806", "9223372036854775807", "2").value_or(-1), 1);
  EXPECT_EQ(LoopTrips("9223372036854775797", "9223372036854775807", "6").value_or(-1), 2);
  // The whole int64 range: i = min, -1, max - 1.
  EXPECT_EQ(LoopTrips("-9223372036854775808", "9223372036854775807", "9223372036854775807")
                .value_or(-1),
            3);
  EXPECT_EQ(LoopTrips("0", "4", "1").value_or(-1), 4);
  EXPECT_EQ(LoopTrips("0", "5", "2").value_or(-1), 3);
  EXPECT_EQ(LoopTrips("3", "3", "1").value_or(-1), 0);
  EXPECT_EQ(LoopTrips("5", "-5", "1").value_or(-1), 0);
}

TEST(InterpreterTest, NegativeStreamValuesAreRejectedAtTheOp) {
  // The verifier rejects `stream = -1`; a stream value that is negative only at run time
  // (here on device 0) is rejected when the op runs, at the op's location.
  std::unique_ptr<Module> module = Parse(
      "mesh @m(dp=2)\n"
      "spmd func @f(%x: f32[1]) -> f32[1] {\n"
      "  %r = rank() {axis = dp}\n"
      "  %one = full() {value = 1} : index\n"
      "  %s = sub(%r, %one)\n"
      "  %a = neg(%x) {stream = %s}\n"
      "  return %a\n"
      "}\n");
  ASSERT_NE(module, nullptr);
  RecordingBackend backend;
  Interpreter interpreter(*module->functions()[0], backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(Inputs(2));
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(outputs.status().message()), ::testing::HasSubstr("stream"));
  EXPECT_THAT(std::string(outputs.status().message()), ::testing::HasSubstr("-1"));
  EXPECT_EQ(interpreter.error_location().line, 6);
  EXPECT_EQ(interpreter.error_location().col, 8);
  EXPECT_TRUE(backend.ops.empty());  // nothing was issued on the bad stream
}

// Device-resident values that count themselves: how many tensors the interpreter holds
// at any time, and the most it ever held.
class LiveCountingBackend : public Backend {
 public:
  int live = 0;
  int peak = 0;

  absl::string_view name() const override { return "live-counting"; }
  bool uses_device_memory() const override { return true; }
  absl::StatusOr<std::vector<Tensor>> RunOp(const Operation& op, const OpContext&,
                                            absl::Span<const Tensor* const> tensors,
                                            absl::Span<const int64_t>) override {
    for (const Tensor* t : tensors) {
      // A released operand would be a use after free in a real device backend.
      if (t->rank() > 0 && !t->on_device()) return absl::InternalError("host operand");
    }
    std::vector<Tensor> out;
    for (const Value* result : op.results()) {
      out.push_back(Make(result->type().element_type(), result->type().dims()));
    }
    return out;
  }
  absl::StatusOr<std::vector<Tensor>> RunCollective(const Operation& op, const CollectiveContext&,
                                                    absl::Span<const Tensor* const> parts) override {
    std::vector<Tensor> out;
    for (size_t i = 0; i < parts.size(); ++i) {
      out.push_back(Make(op.result(0)->type().element_type(), op.result(0)->type().dims()));
    }
    return out;
  }
  absl::StatusOr<Tensor> ToDevice(int64_t, const Tensor& host) override {
    return Make(host.element_type(), host.shape());
  }
  absl::StatusOr<Tensor> ToHost(const Tensor& value) override {
    return Tensor(value.element_type(), value.shape());
  }

 private:
  class Counted : public DeviceStorage {
   public:
    explicit Counted(LiveCountingBackend* backend) : backend_(backend) {
      backend_->peak = std::max(backend_->peak, ++backend_->live);
    }
    ~Counted() override { --backend_->live; }

   private:
    LiveCountingBackend* backend_;
  };
  Tensor Make(ElementType type, std::vector<int64_t> shape) {
    return Tensor::OnDevice(type, std::move(shape), std::make_shared<Counted>(this));
  }
};

// A chain of `length` negations of %x, starting from `first` and named %<prefix><i>.
std::string Chain(const std::string& first, const std::string& prefix, int length,
                  const std::string& indent) {
  std::string text;
  for (int i = 0; i < length; ++i) {
    absl::StrAppend(&text, indent, "%", prefix, i, " = neg(",
                    i == 0 ? first : absl::StrCat("%", prefix, i - 1), ")\n");
  }
  return text;
}

TEST(InterpreterTest, ValuesAreReleasedAfterTheirLastUse) {
  std::unique_ptr<Module> module = Parse(absl::StrCat(
      "mesh @m(dp=2)\n"
      "spmd func @f(%x: f32[1]) -> f32[1] {\n",
      Chain("%x", "v", 200, "  "), "  return %v199\n}\n"));
  ASSERT_NE(module, nullptr);
  LiveCountingBackend backend;
  Interpreter interpreter(*module->functions()[0], backend);
  ASSERT_TRUE(interpreter.Run(Inputs(2)).ok());
  // Per device: the input is released after its one use, an op's operand only after the
  // op has made its result: at most two values each, not one per op.
  EXPECT_LE(backend.peak, 4);
  EXPECT_EQ(backend.live, 0);
}

TEST(InterpreterTest, LoopsKeepOuterValuesAndReleaseBodyValues) {
  // %w is defined before the loop and used in every iteration: it must live until the
  // loop ends. Body values and the carried values of finished iterations are released.
  std::unique_ptr<Module> module = Parse(absl::StrCat(
      "mesh @m(dp=1)\n"
      "spmd func @f(%x: f32[1]) -> (f32[1], f32[1]) {\n"
      "  %w = neg(%x)\n"
      "  %unused = neg(%x)\n"
      "  %r = for %i = 0 to 20 step 1 iter(%a = %x) {\n",
      Chain("%a", "b", 50, "    "),
      "    %c = add(%b49, %w)\n"
      "    %s = add(%i, %i)\n"
      "    %t = neg(%c) {stream = %s}\n"
      "    yield %t\n"
      "  } : (f32[1])\n"
      "  %z = neg(%w)\n"
      "  return %r, %z\n"
      "}\n"));
  ASSERT_NE(module, nullptr);
  LiveCountingBackend backend;
  Interpreter interpreter(*module->functions()[0], backend);
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(Inputs(1));
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  // %x, %w, the carried value and two chain values at the most.
  EXPECT_LE(backend.peak, 6);
  EXPECT_EQ(backend.live, 0);
}

TEST(InterpreterTest, RefusesAbsurdDeviceCountsWithoutPerDeviceTables) {
  std::unique_ptr<Module> module = Parse(
      "mesh @m(dp=1000000000)\n"
      "spmd func @f(%x: f32[1]) -> f32[1] {\n"
      "  %a = neg(%x)\n"
      "  return %a\n"
      "}\n");
  ASSERT_NE(module, nullptr);
  RecordingBackend backend;
  Interpreter interpreter(*module->functions()[0], backend);
  EXPECT_TRUE(interpreter.local_devices().empty());
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run({});
  EXPECT_EQ(outputs.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(outputs.status().message()),
              ::testing::HasSubstr("mesh @m has 1000000000 devices"));
  EXPECT_EQ(interpreter.set_local_devices({0}).code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace commir::runtime
