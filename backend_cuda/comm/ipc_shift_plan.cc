#include "backend_cuda/comm/ipc_shift_plan.h"

#include "backend_cuda/comm/p2p_route.h"

namespace commir::cuda::comm {
namespace {

IpcPlace Staging(int64_t device, int64_t devices_per_process, int64_t offset_in_home) {
  return IpcPlace{IpcPlace::Kind::kStaging, static_cast<int>(device / devices_per_process),
                  offset_in_home};
}

IpcStreamOp Wait(IpcPlace flag, uint32_t value) {
  IpcStreamOp op;
  op.kind = IpcStreamOp::Kind::kWaitFlag;
  op.flag = flag;
  op.value = value;
  return op;
}

IpcStreamOp Write(IpcPlace flag, uint32_t value) {
  IpcStreamOp op = Wait(flag, value);
  op.kind = IpcStreamOp::Kind::kWriteFlag;
  return op;
}

IpcStreamOp Copy(IpcPlace src, IpcPlace dst, int64_t bytes) {
  IpcStreamOp op;
  op.kind = IpcStreamOp::Kind::kCopy;
  op.src = src;
  op.dst = dst;
  op.bytes = bytes;
  return op;
}

}  // namespace

std::vector<IpcStreamOp> IpcShiftOps(const IpcShiftCall& c) {
  const int64_t n = static_cast<int64_t>(c.group.size());
  const int64_t k = c.devices_per_process;
  const int64_t self = c.group[c.position];
  const int64_t dst = c.group[ShiftDestination(n, c.position, c.offset)];
  const int own_process = static_cast<int>(self / k);
  auto slot = [&](int64_t device) { return Staging(device, k, SlotOffset(device % k, c.slot_bytes)); };
  auto ready = [&](int64_t device) { return Staging(device, k, ReadyFlagOffset(device % k)); };
  auto drained = [&](int64_t device, int process) {
    return IpcPlace{IpcPlace::Kind::kStaging, process, DrainedFlagOffset(device)};
  };
  const IpcPlace send{IpcPlace::Kind::kSend, 0, 0};
  const IpcPlace recv{IpcPlace::Kind::kRecv, 0, 0};
  std::vector<IpcStreamOp> ops;
  ops.push_back(Wait(drained(dst, own_process), c.sequence - 1));
  ops.push_back(Copy(send, slot(dst), c.bytes));
  ops.push_back(Write(ready(dst), c.sequence));
  ops.push_back(Wait(ready(self), c.sequence));
  ops.push_back(Copy(slot(self), recv, c.bytes));
  for (int p = 0; p < c.processes; ++p) ops.push_back(Write(drained(self, p), c.sequence));
  return ops;
}

}  // namespace commir::cuda::comm
