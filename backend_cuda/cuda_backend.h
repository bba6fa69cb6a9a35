// The cuda backend of commir-run: runtime::Backend on NVIDIA GPUs.
//
// Values live in device memory (DeviceBuffer from the stream-aware CachingAllocator).
// Each local mesh device has its own CUDA streams, one per CommIR stream number it
// uses, created non-blocking so the legacy default stream never serialises them. An op
// is enqueued on its stream and returns at once: its operands' producers on other
// streams are waited for with cudaStreamWaitEvent on events recorded after them, and
// its results record such an event in turn (ops wait for their operands only).
// The host blocks only in ToHost (results, --check), bounded by the timeout.
//
// GEMMs go through cuBLASLt (cublaslt_gemm.h), every other tensor op through the
// kernels of backend_cuda/kernels, collectives through the CollectiveEngine of
// backend_cuda/comm (copy engines inside a node, NCCL across nodes and for reductions
// between GPUs; --p2p=nccl for NCCL wherever it runs).
// Collectives along arbitrary dims are mapped to the engine's contiguous rank-major
// blocks with transposes before and after (see cuda_backend.cc).
#ifndef COMMIR_BACKEND_CUDA_CUDA_BACKEND_H_
#define COMMIR_BACKEND_CUDA_CUDA_BACKEND_H_

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend_cuda/caching_allocator.h"
#include "backend_cuda/comm/collective_engine.h"
#include "backend_cuda/comm/launch.h"
#include "backend_cuda/cublaslt_gemm.h"
#include "runtime/backend.h"

namespace commir::cuda {

struct CudaBackendOptions {
  // How this process was started; DetectLaunch(ProcessEnv()) by default in commir-run.
  comm::LaunchInfo launch;
  // Mesh axis sizes (row-major device numbering); {1} for a global function.
  std::vector<int64_t> mesh_shape = {1};
  // Bounds every host wait (results, collectives, communicator creation); zero or
  // negative: unbounded.
  absl::Duration timeout = absl::Seconds(300);
  bool allow_tf32 = false;
  std::string rendezvous_file;  // empty: TCP on MASTER_ADDR:MASTER_PORT
  // --p2p: copy engines inside a node (default) or NCCL (comm/collective_engine.h).
  comm::P2pTransport p2p = comm::P2pTransport::kCopyEngine;
  // --nccl-ctas: NCCL's SM budget (ncclConfig_t minCTAs / maxCTAs); 0: NCCL's choice.
  int nccl_min_ctas = 0;
  int nccl_max_ctas = 0;
};

class CudaBackend : public runtime::Backend {
 public:
  // Finds the GPUs, plans which mesh devices this process drives (comm::PlanDevices)
  // and sets up streams, allocators and cuBLASLt. Unavailable with a clear message when
  // there is no GPU or the driver is too old.
  static absl::StatusOr<std::unique_ptr<CudaBackend>> Create(CudaBackendOptions options);
  ~CudaBackend() override;

  absl::string_view name() const override { return "cuda"; }
  bool uses_device_memory() const override { return true; }
  // Matmuls read dynamic_slice blocks where they lie: cuBLASLt gets a pointer at the block
  // and the sliced matrix's row length as leading dimension (two matrices, types it
  // multiplies directly); other matmuls slice first, as before.
  bool ReadsSlicesInPlace() const override { return true; }
  absl::StatusOr<std::vector<runtime::Tensor>> RunOp(
      const Operation& op, const runtime::OpContext& context,
      absl::Span<const runtime::Tensor* const> tensors,
      absl::Span<const int64_t> indices) override;
  // A `full` overwritten before any read (runtime/in_place.h: FillOverwrittenBeforeRead):
  // a stream-ordered allocation from the caching allocator, no fill kernel.
  absl::StatusOr<std::vector<runtime::Tensor>> AllocateUnfilled(
      const Operation& full, const runtime::OpContext& context) override;
  // A matmul of two matrices stored straight into the handed-over destination of its
  // dynamic_update_slice: one cuBLASLt call with the output pointer at the block
  // (runtime/in_place.h's PlaceBlock) and the destination's row length as its leading
  // dimension. Declines (false) for types cuBLASLt does not write directly, batches and
  // blocks that do not fit.
  absl::StatusOr<bool> RunMatmulInto(const Operation& matmul, const runtime::OpContext& context,
                                     absl::Span<const runtime::Tensor* const> tensors,
                                     const Operation& update, int64_t offset,
                                     runtime::Tensor& destination) override;
  // A shift received straight into each member's slot of its handed-over update
  // destination (shift_slot.h): the engine's receive pointer is the slot (an offset
  // pointer), or a 2-D strided receive on the copy-engine routes inside one process.
  // Declines (false) where the route needs contiguous memory and the slot is strided
  // (NCCL, the IPC staging path: the block is then received apart and copied by the
  // update) and for blocks that do not fit.
  absl::StatusOr<bool> RunShiftInto(const Operation& shift,
                                    const runtime::CollectiveContext& context,
                                    absl::Span<const runtime::Tensor* const> parts,
                                    const Operation& update, absl::Span<const int64_t> offsets,
                                    absl::Span<runtime::Tensor* const> destinations) override;
  // A ring's carried block lives in its slot (runtime/in_place.h: CarriedBlockInSlot)
  // where the slot is contiguous (shift_slot.h: CarriedBlockContiguous): RunShiftInto
  // sends it from the slot (an offset send pointer) into the next member's slot, and
  // cuBLASLt reads it there with the gathered value's row length as leading dimension.
  // Readers wait for the receive of their own slot (DeviceBuffer::UseSlotOn), not for the
  // next step's. A strided slot keeps the block in a buffer of its own.
  bool ReceivesCarriedBlockInSlot(const runtime::CarriedRing& ring) const override;
  absl::StatusOr<std::vector<runtime::Tensor>> RunCollective(
      const Operation& op, const runtime::CollectiveContext& context,
      absl::Span<const runtime::Tensor* const> parts) override;
  absl::StatusOr<runtime::Tensor> ToDevice(int64_t device, const runtime::Tensor& host) override;
  absl::StatusOr<runtime::Tensor> ToHost(const runtime::Tensor& value) override;

  // Waits (bounded by the timeout) until everything enqueued so far has finished, and
  // reports integer errors the kernels flagged (division by zero, ...).
  absl::Status Synchronize();

  // For a run spread over processes: every mesh device's part of one result, on every
  // process. local_parts[i] is the part of local_devices()[i] (host tensors of one type
  // and shape, as SPMD results are); the parts travel by an all_gather over the whole
  // mesh. Returns num_devices host tensors.
  absl::StatusOr<std::vector<runtime::Tensor>> GatherParts(
      absl::Span<const runtime::Tensor* const> local_parts);

  const comm::DevicePlan& plan() const { return plan_; }
  // The mesh devices this process drives, ascending (for Interpreter::set_local_devices).
  std::vector<int64_t> local_devices() const;
  // The CUDA stream that CommIR stream `stream` of mesh `device` runs on (created on
  // first use); for benchmarks and tests.
  absl::StatusOr<cudaStream_t> StreamFor(int64_t device, int64_t stream);
  int GpuOf(int64_t device) const;
  // Memory statistics of the allocator of a GPU.
  CachingAllocator::Stats MemoryStats(int gpu);

 private:
  struct Gpu {
    int ordinal = 0;
    std::shared_ptr<CachingAllocator> allocator;
    std::unique_ptr<CublasLtGemm> gemm;
    cudaStream_t copy_stream = nullptr;  // device-to-host copies of results only
    int32_t* error_flag = nullptr;       // kernels' data-dependent error bits
  };
  struct Device {
    int gpu_index = 0;  // into gpus_
    std::map<int64_t, cudaStream_t> streams;
    // Uploaded number literals, by (element type, value bits).
    absl::flat_hash_map<std::pair<int, uint64_t>, runtime::Tensor> literals;
  };

  explicit CudaBackend(CudaBackendOptions options);
  absl::Status Init();
  Gpu& GpuFor(int64_t device);
  Device& DeviceState(int64_t device);
  absl::StatusOr<runtime::Tensor> Allocate(int64_t device, cudaStream_t stream,
                                           ElementType type, std::vector<int64_t> shape);
  // The device pointer of an operand, after making `stream` wait for its producer; a
  // host literal is uploaded (once per value) first.
  absl::StatusOr<const void*> Operand(int64_t device, cudaStream_t stream,
                                      const runtime::Tensor& tensor);
  // Dispatches to the op's launcher (launchers.h) with its operands on the device;
  // `donated` is operand 0 when the interpreter handed it over (OpContext::donated).
  absl::StatusOr<std::vector<runtime::Tensor>> RunTensorOp(
      const Operation& op, int64_t device, cudaStream_t stream,
      absl::Span<const runtime::Tensor* const> tensors, absl::Span<const int64_t> indices,
      runtime::Tensor* donated = nullptr);
  absl::Status WaitFor(const DeviceBuffer& buffer);
  // A matmul some of whose operands are blocks read in place (OpContext::sliced).
  absl::StatusOr<std::vector<runtime::Tensor>> RunSlicedMatmul(
      const Operation& op, int64_t device, cudaStream_t stream,
      absl::Span<const runtime::Tensor* const> tensors,
      absl::Span<const runtime::SlicedOperand* const> sliced);
  // Operand i of a matmul as a matrix cuBLASLt reads: its shape, the device pointer of
  // its first element (after `stream` waits for its producer) and its row stride.
  struct MatrixOperand {
    std::vector<int64_t> shape;
    const void* data = nullptr;
    int64_t row_stride = 0;
  };
  // Whether a view is a ring's carried block in its slot (runtime/backend.h:
  // SlicedOperand), not a slice's block.
  static bool IsCarriedBlock(const runtime::SlicedOperand& view);
  // A ring's carried block copied out of its slot into a tensor of its own, for a reader
  // that takes no view (a batched or converting matmul).
  absl::StatusOr<runtime::Tensor> CopyCarriedBlock(int64_t device, cudaStream_t stream,
                                                   const runtime::SlicedOperand& view);
  absl::StatusOr<MatrixOperand> MatrixOperandOf(
      int64_t device, cudaStream_t stream, absl::Span<const runtime::Tensor* const> tensors,
      absl::Span<const runtime::SlicedOperand* const> sliced, size_t i);

  CudaBackendOptions options_;
  comm::DevicePlan plan_;
  std::vector<Gpu> gpus_;
  std::map<int64_t, Device> devices_;  // local mesh devices
  std::unique_ptr<comm::CollectiveEngine> engine_;
};

// The DeviceBuffer of a device-resident tensor (null for a host tensor).
DeviceBuffer* BufferOf(const runtime::Tensor& tensor);

}  // namespace commir::cuda

#endif  // COMMIR_BACKEND_CUDA_CUDA_BACKEND_H_
