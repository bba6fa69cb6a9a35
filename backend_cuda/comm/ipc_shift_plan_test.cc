// Runs the stream operations of IpcShiftOps for every member of a mesh spread over
// processes, several shifts in a row issued at once (the host never waits), under
// random interleavings of the members' transfer streams: every call must deliver the
// source's data of that call, and nothing may deadlock. A plan without the "drained"
// wait is caught overwriting a slot.
#include "backend_cuda/comm/ipc_shift_plan.h"

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backend_cuda/comm/p2p_route.h"
#include "gtest/gtest.h"

namespace commir::cuda::comm {
namespace {

constexpr int64_t kBytes = 8;

struct Sim {
  int64_t processes = 2;
  int64_t per_process = 1;
  std::vector<int64_t> offsets;  // one shift per entry
  // Applied to each member's op list of each call (to break the plan on purpose).
  std::function<void(std::vector<IpcStreamOp>&)> mutate;
};

// Outcome of one interleaving: "" when every call delivered the right bytes.
std::string Simulate(const Sim& sim, uint32_t seed) {
  const int64_t devices = sim.processes * sim.per_process;
  const int64_t slot = kBytes;
  std::vector<std::vector<uint8_t>> staging(
      sim.processes, std::vector<uint8_t>(kFlagBytes + sim.per_process * slot, 0));
  std::vector<int64_t> group;
  for (int64_t d = 0; d < devices; ++d) group.push_back(d);
  const int64_t calls = static_cast<int64_t>(sim.offsets.size());
  // send[c][d], recv[c][d]: a fresh buffer per call, as the executor allocates.
  std::vector<std::vector<std::vector<uint8_t>>> send(calls), recv(calls);
  struct Pending {
    IpcStreamOp op;
    int64_t call;
    int64_t device;
  };
  std::vector<std::deque<Pending>> streams(devices);
  for (int64_t c = 0; c < calls; ++c) {
    for (int64_t d = 0; d < devices; ++d) {
      std::vector<uint8_t> data(kBytes);
      for (int64_t i = 0; i < kBytes; ++i) data[i] = static_cast<uint8_t>(d * 31 + c * 7 + i);
      send[c].push_back(data);
      recv[c].push_back(std::vector<uint8_t>(kBytes, 0xee));
      IpcShiftCall call{group,  d,      sim.offsets[c], sim.per_process, sim.processes,
                        slot,   kBytes, static_cast<uint32_t>(c + 1)};
      std::vector<IpcStreamOp> ops = IpcShiftOps(call);
      if (sim.mutate) sim.mutate(ops);
      for (const IpcStreamOp& op : ops) streams[d].push_back({op, c, d});
    }
  }
  auto bytes_of = [&](const IpcPlace& p, int64_t call, int64_t device) -> uint8_t* {
    switch (p.kind) {
      case IpcPlace::Kind::kSend:
        return send[call][device].data();
      case IpcPlace::Kind::kRecv:
        return recv[call][device].data();
      case IpcPlace::Kind::kStaging:
        return staging.at(p.process).data() + p.offset;
    }
    return nullptr;
  };
  std::mt19937 random(seed);
  while (true) {
    std::vector<int64_t> runnable;
    bool pending = false;
    for (int64_t d = 0; d < devices; ++d) {
      if (streams[d].empty()) continue;
      pending = true;
      const Pending& head = streams[d].front();
      if (head.op.kind == IpcStreamOp::Kind::kWaitFlag) {
        uint32_t flag;
        std::memcpy(&flag, bytes_of(head.op.flag, head.call, d), 4);
        if (static_cast<int32_t>(flag - head.op.value) < 0) continue;  // cyclic >=
      }
      runnable.push_back(d);
    }
    if (!pending) break;
    if (runnable.empty()) return "deadlock";
    const int64_t d = runnable[random() % runnable.size()];
    const Pending p = streams[d].front();
    streams[d].pop_front();
    if (p.op.kind == IpcStreamOp::Kind::kCopy) {
      std::memcpy(bytes_of(p.op.dst, p.call, d), bytes_of(p.op.src, p.call, d), p.op.bytes);
    } else if (p.op.kind == IpcStreamOp::Kind::kWriteFlag) {
      std::memcpy(bytes_of(p.op.flag, p.call, d), &p.op.value, 4);
    }
  }
  for (int64_t c = 0; c < calls; ++c) {
    for (int64_t d = 0; d < devices; ++d) {
      const int64_t from = ShiftSource(devices, d, sim.offsets[c]);
      if (recv[c][d] != send[c][from]) {
        return absl::StrFormat("call %d: device %d did not get device %d's data", c, d, from);
      }
    }
  }
  return "";
}

TEST(IpcShiftPlanTest, EveryInterleavingDeliversEveryCall) {
  const std::vector<Sim> sims = {
      {2, 1, {1, 1, -1, 1, 1, 1}},
      {4, 1, {1, -1, 2, 3, 1, 1, 5, -2}},
      {2, 2, {1, 1, 3, -1, 2, 1}},  // two local members per process
      {3, 2, {1, 4, -1, 1, 1}},
  };
  for (const Sim& sim : sims) {
    for (uint32_t seed = 0; seed < 300; ++seed) {
      ASSERT_EQ(Simulate(sim, seed), "") << sim.processes << " processes x " << sim.per_process
                                    << " devices, seed " << seed;
    }
  }
}

TEST(IpcShiftPlanTest, WithoutTheDrainedWaitASlotIsOverwritten) {
  Sim sim{2, 1, {1, 1, 1, 1, 1, 1}};
  sim.mutate = [](std::vector<IpcStreamOp>& ops) { ops.erase(ops.begin()); };
  int broken = 0;
  for (uint32_t seed = 0; seed < 300; ++seed) broken += Simulate(sim, seed).empty() ? 0 : 1;
  EXPECT_GT(broken, 0);
}

TEST(IpcShiftPlanTest, OpsNameTheRightSlotsAndFlags) {
  // Devices 0..3 on 2 processes (2 each); device 1 shifts by +1: pushes into device 2's
  // slot (process 1, local index 0), reads its own (process 0, local index 1).
  const std::vector<int64_t> group = {0, 1, 2, 3};
  std::vector<IpcStreamOp> ops = IpcShiftOps({group, 1, 1, 2, 2, 64, 40, 7});
  ASSERT_EQ(ops.size(), 7u);
  EXPECT_EQ(ops[0].flag.process, 0);  // this process's copy of device 2's drained count
  EXPECT_EQ(ops[0].flag.offset, DrainedFlagOffset(2));
  EXPECT_EQ(ops[0].value, 6u);
  EXPECT_EQ(ops[1].dst.process, 1);
  EXPECT_EQ(ops[1].dst.offset, SlotOffset(0, 64));
  EXPECT_EQ(ops[1].bytes, 40);
  EXPECT_EQ(ops[2].flag.process, 1);
  EXPECT_EQ(ops[2].flag.offset, ReadyFlagOffset(0));
  EXPECT_EQ(ops[3].flag.process, 0);
  EXPECT_EQ(ops[3].flag.offset, ReadyFlagOffset(1));
  EXPECT_EQ(ops[4].src.process, 0);
  EXPECT_EQ(ops[4].src.offset, SlotOffset(1, 64));
  // Device 1's drained count goes to both processes.
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(ops[5 + p].flag.process, p);
    EXPECT_EQ(ops[5 + p].flag.offset, DrainedFlagOffset(1));
    EXPECT_EQ(ops[5 + p].value, 7u);
  }
}

}  // namespace
}  // namespace commir::cuda::comm
