#include "backend_cuda/cuda_backend.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend_cuda/collective_kernels.h"
#include "backend_cuda/cuda_status.h"
#include "backend_cuda/kernels/dtype.h"
#include "backend_cuda/kernels/elementwise.h"
#include "backend_cuda/kernels/layout.h"
#include "backend_cuda/launch_context.h"
#include "backend_cuda/launchers.h"
#include "backend_cuda/shift_slot.h"
#include "commir/check.h"
#include "runtime/in_place.h"

namespace commir::cuda {
namespace {

using runtime::Tensor;
namespace k = ::commir::cuda_kernels;

// The permutation that moves dimension `from` of a rank-`rank` tensor to position `to`,
// keeping the others in order.
std::vector<int64_t> MovePerm(int64_t rank, int64_t from, int64_t to) {
  std::vector<int64_t> rest;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != from) rest.push_back(i);
  }
  rest.insert(rest.begin() + to, from);
  return rest;
}

absl::Duration Unbounded() { return absl::InfiniteDuration(); }

}  // namespace

DeviceBuffer* BufferOf(const Tensor& tensor) {
  return static_cast<DeviceBuffer*>(tensor.device_storage());
}

CudaBackend::CudaBackend(CudaBackendOptions options) : options_(std::move(options)) {}

CudaBackend::~CudaBackend() {
  // Results and literals first (they hold buffers), then the engine, then streams.
  for (auto& [id, device] : devices_) device.literals.clear();
  engine_.reset();
  for (Gpu& gpu : gpus_) {
    cudaSetDevice(gpu.ordinal);
    cudaDeviceSynchronize();
  }
  for (auto& [id, device] : devices_) {
    for (auto& [number, stream] : device.streams) cudaStreamDestroy(stream);
  }
  for (Gpu& gpu : gpus_) {
    cudaSetDevice(gpu.ordinal);
    if (gpu.error_flag != nullptr) cudaFree(gpu.error_flag);
    if (gpu.copy_stream != nullptr) cudaStreamDestroy(gpu.copy_stream);
    gpu.gemm.reset();
  }
}

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(CudaBackendOptions options) {
  // An op without a kernel is a programming error: report it before touching a GPU.
  if (absl::Status s = CheckCudaTensorLaunchers(CudaTensorLaunchers()); !s.ok()) return s;
  if (absl::Status s = CheckCudaCollectiveKernels(CudaCollectiveKernels()); !s.ok()) return s;
  std::unique_ptr<CudaBackend> backend(new CudaBackend(std::move(options)));
  if (absl::Status s = backend->Init(); !s.ok()) return s;
  return backend;
}

absl::Status CudaBackend::Init() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) return CudaStatus(error, "cudaGetDeviceCount");
  if (count == 0) {
    return absl::UnavailableError(
        "no CUDA-capable GPU is visible (cudaGetDeviceCount = 0); check nvidia-smi and "
        "CUDA_VISIBLE_DEVICES");
  }
  int64_t mesh_size = 1;
  for (int64_t extent : options_.mesh_shape) mesh_size *= extent;
  absl::StatusOr<comm::DevicePlan> plan = comm::PlanDevices(options_.launch, mesh_size, count);
  if (!plan.ok()) return absl::FailedPreconditionError(plan.status().message());
  plan_ = *std::move(plan);

  std::map<int, int> gpu_index;  // ordinal -> index into gpus_
  for (const comm::LocalDevice& local : plan_.local) {
    auto [it, inserted] = gpu_index.emplace(local.gpu, static_cast<int>(gpus_.size()));
    if (inserted) {
      Gpu gpu;
      gpu.ordinal = local.gpu;
      COMMIR_CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu.ordinal), "cudaSetDevice");
      gpu.allocator = CachingAllocator::Create(gpu.ordinal);
      CublasLtGemm::Options gemm_options;
      gemm_options.allow_tf32 = options_.allow_tf32;
      absl::StatusOr<std::unique_ptr<CublasLtGemm>> gemm =
          CublasLtGemm::Create(gpu.allocator, gemm_options);
      if (!gemm.ok()) return gemm.status();
      gpu.gemm = *std::move(gemm);
      COMMIR_CUDA_RETURN_IF_ERROR(
          cudaStreamCreateWithFlags(&gpu.copy_stream, cudaStreamNonBlocking),
          "cudaStreamCreateWithFlags");
      COMMIR_CUDA_RETURN_IF_ERROR(cudaMalloc(&gpu.error_flag, sizeof(int32_t)), "cudaMalloc");
      COMMIR_CUDA_RETURN_IF_ERROR(cudaMemset(gpu.error_flag, 0, sizeof(int32_t)), "cudaMemset");
      gpus_.push_back(std::move(gpu));
    }
    devices_[local.mesh_device].gpu_index = it->second;
  }
  comm::EngineOptions engine_options;
  engine_options.rendezvous_file = options_.rendezvous_file;
  engine_options.p2p = options_.p2p;
  engine_options.nccl_min_ctas = options_.nccl_min_ctas;
  engine_options.nccl_max_ctas = options_.nccl_max_ctas;
  if (options_.timeout > absl::ZeroDuration()) engine_options.timeout = options_.timeout;
  else engine_options.timeout = Unbounded();
  absl::StatusOr<std::unique_ptr<comm::CollectiveEngine>> engine = comm::CollectiveEngine::Create(
      options_.launch, plan_, options_.mesh_shape, engine_options);
  if (!engine.ok()) return engine.status();
  engine_ = *std::move(engine);
  return absl::OkStatus();
}

std::vector<int64_t> CudaBackend::local_devices() const {
  std::vector<int64_t> ids;
  for (const auto& [id, device] : devices_) ids.push_back(id);
  return ids;
}

CudaBackend::Device& CudaBackend::DeviceState(int64_t device) {
  auto it = devices_.find(device);
  COMMIR_CHECK(it != devices_.end(), "the interpreter ran a device this process does not drive");
  return it->second;
}

CudaBackend::Gpu& CudaBackend::GpuFor(int64_t device) {
  return gpus_[DeviceState(device).gpu_index];
}

int CudaBackend::GpuOf(int64_t device) const {
  auto it = devices_.find(device);
  return it == devices_.end() ? -1 : gpus_[it->second.gpu_index].ordinal;
}

CachingAllocator::Stats CudaBackend::MemoryStats(int gpu) {
  for (Gpu& g : gpus_) {
    if (g.ordinal == gpu) return g.allocator->stats();
  }
  return {};
}

absl::StatusOr<cudaStream_t> CudaBackend::StreamFor(int64_t device, int64_t stream) {
  Device& state = DeviceState(device);
  auto it = state.streams.find(stream);
  if (it != state.streams.end()) return it->second;
  COMMIR_CUDA_RETURN_IF_ERROR(cudaSetDevice(gpus_[state.gpu_index].ordinal), "cudaSetDevice");
  // Non-blocking: never implicitly synchronised with the legacy default stream, so the
  // program's streams overlap as written. Mesh devices sharing a GPU get their own
  // streams, so they overlap too.
  cudaStream_t created = nullptr;
  COMMIR_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking),
                              "cudaStreamCreateWithFlags");
  state.streams.emplace(stream, created);
  return created;
}

absl::StatusOr<Tensor> CudaBackend::Allocate(int64_t device, cudaStream_t stream, ElementType type,
                                             std::vector<int64_t> shape) {
  const size_t bytes = static_cast<size_t>(runtime::NumElements(shape)) * ElementTypeByteWidth(type);
  absl::StatusOr<std::shared_ptr<DeviceBuffer>> buffer = GpuFor(device).allocator->Allocate(bytes, stream);
  if (!buffer.ok()) return buffer.status();
  return Tensor::OnDevice(type, std::move(shape), *std::move(buffer));
}

absl::StatusOr<const void*> CudaBackend::Operand(int64_t device, cudaStream_t stream,
                                                 const Tensor& tensor) {
  if (tensor.on_device()) {
    DeviceBuffer* buffer = BufferOf(tensor);
    if (buffer->gpu() != GpuFor(device).ordinal) {
      return absl::InternalError(absl::StrFormat(
          "a value of device %d lives on GPU %d, not on its GPU %d", device, buffer->gpu(),
          GpuFor(device).ordinal));
    }
    if (absl::Status s = buffer->UseOn(stream); !s.ok()) return s;
    return static_cast<const void*>(buffer->data());
  }
  // A number literal (rank 0): uploaded once per device, element type and value.
  COMMIR_CHECK(tensor.num_elements() == 1, "only literals arrive as host tensors");
  uint64_t bits = 0;
  std::memcpy(&bits, tensor.raw_data(), std::min<size_t>(sizeof(bits), tensor.byte_size()));
  auto key = std::make_pair(static_cast<int>(tensor.element_type()), bits);
  Device& state = DeviceState(device);
  auto it = state.literals.find(key);
  if (it == state.literals.end()) {
    absl::StatusOr<Tensor> uploaded = ToDevice(device, tensor);
    if (!uploaded.ok()) return uploaded.status();
    it = state.literals.emplace(key, *std::move(uploaded)).first;
  }
  DeviceBuffer* buffer = BufferOf(it->second);
  if (absl::Status s = buffer->UseOn(stream); !s.ok()) return s;
  return static_cast<const void*>(buffer->data());
}

absl::StatusOr<Tensor> CudaBackend::ToDevice(int64_t device, const Tensor& host) {
  if (host.on_device()) return absl::InternalError("ToDevice on a device-resident tensor");
  absl::StatusOr<cudaStream_t> stream = StreamFor(device, 0);
  if (!stream.ok()) return stream.status();
  COMMIR_CUDA_RETURN_IF_ERROR(cudaSetDevice(GpuFor(device).ordinal), "cudaSetDevice");
  absl::StatusOr<Tensor> tensor = Allocate(device, *stream, host.element_type(), host.shape());
  if (!tensor.ok()) return tensor.status();
  DeviceBuffer* buffer = BufferOf(*tensor);
  if (host.byte_size() > 0) {
    // From pageable memory the copy is staged before the call returns, so `host` may go
    // away afterwards; the device side stays ordered on the stream.
    COMMIR_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(buffer->data(), host.raw_data(), host.byte_size(),
                                                cudaMemcpyHostToDevice, *stream),
                                "copying an input to the GPU");
  }
  if (absl::Status s = buffer->MarkWritten(*stream); !s.ok()) return s;
  return tensor;
}

absl::Status CudaBackend::WaitFor(const DeviceBuffer& buffer) {
  // Poll rather than block: a hung collective upstream must become an error after the
  // timeout, not a silent hang (docs/commir-run-cuda.md).
  const bool bounded = options_.timeout > absl::ZeroDuration();
  const absl::Time deadline = absl::Now() + options_.timeout;
  auto sleep = std::chrono::microseconds(2);
  while (true) {
    absl::StatusOr<bool> ready = buffer.Ready();
    if (!ready.ok()) return ready.status();
    if (*ready) return absl::OkStatus();
    if (bounded && absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "timed out after %s waiting for the GPU (a hung collective or a very long "
          "step); raise --timeout or pass --timeout=0 to wait forever",
          absl::FormatDuration(options_.timeout)));
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(1000));
  }
}

absl::StatusOr<Tensor> CudaBackend::ToHost(const Tensor& value) {
  if (!value.on_device()) return value;
  DeviceBuffer* buffer = BufferOf(value);
  // Collectives first: the engine polls NCCL's asynchronous errors and aborts hung
  // communicators, which waiting on an event alone cannot do.
  if (absl::Status s = engine_->WaitAll(options_.timeout > absl::ZeroDuration() ? options_.timeout
                                                                                : Unbounded());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = WaitFor(*buffer); !s.ok()) return s;
  Gpu* gpu = nullptr;
  for (Gpu& g : gpus_) {
    if (g.ordinal == buffer->gpu()) gpu = &g;
  }
  COMMIR_CHECK(gpu != nullptr, "a buffer on a GPU this backend does not use");
  COMMIR_CUDA_RETURN_IF_ERROR(cudaSetDevice(gpu->ordinal), "cudaSetDevice");
  Tensor host(value.element_type(), value.shape());
  if (host.byte_size() > 0) {
    // The producer has finished, so this copy on its own stream cannot hang.
    COMMIR_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host.raw_data(), buffer->data(), host.byte_size(),
                                                cudaMemcpyDeviceToHost, gpu->copy_stream),
                                "copying a result from the GPU");
  }
  int32_t flag = 0;
  COMMIR_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&flag, gpu->error_flag, sizeof(flag),
                                              cudaMemcpyDeviceToHost, gpu->copy_stream),
                              "reading the error flag");
  COMMIR_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(gpu->copy_stream), "cudaStreamSynchronize");
  if (flag != 0) {
    std::vector<std::string> what;
    if (flag & k::kErrIntDivByZero) what.push_back("integer division by zero");
    if (flag & k::kErrIntNegativePow) what.push_back("integer pow with a negative exponent");
    if (flag & k::kErrEmptyIntMean) what.push_back("integer reduce_mean over no elements");
    if (flag & k::kErrIndexOutOfRange) {
      what.push_back("a gather or scatter_add index out of range of its axis");
    }
    if (flag & k::kErrLabelOutOfRange) {
      what.push_back("a cross_entropy label neither a class nor ignore_index");
    }
    return absl::InvalidArgumentError(
        absl::StrCat("the program did ", absl::StrJoin(what, " and "), " on the GPU"));
  }
  return host;
}

absl::Status CudaBackend::Synchronize() {
  if (absl::Status s = engine_->WaitAll(options_.timeout > absl::ZeroDuration() ? options_.timeout
                                                                                : Unbounded());
      !s.ok()) {
    return s;
  }
  for (auto& [id, device] : devices_) {
    for (auto& [number, stream] : device.streams) {
      // An event per stream, polled with the timeout.
      absl::StatusOr<cudaEvent_t> event = gpus_[device.gpu_index].allocator->events().Acquire();
      if (!event.ok()) return event.status();
      COMMIR_CUDA_RETURN_IF_ERROR(cudaEventRecord(*event, stream), "cudaEventRecord");
      const absl::Time deadline = absl::Now() + options_.timeout;
      cudaError_t state;
      while ((state = QueryEvent(*event)) == cudaErrorNotReady) {
        if (options_.timeout > absl::ZeroDuration() && absl::Now() > deadline) {
          return absl::DeadlineExceededError(absl::StrFormat(
              "timed out after %s waiting for device %d", absl::FormatDuration(options_.timeout), id));
        }
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      gpus_[device.gpu_index].allocator->events().Release(*event);
      COMMIR_CUDA_RETURN_IF_ERROR(state, "waiting for the GPU");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Tensor>> CudaBackend::RunOp(const Operation& op,
                                                       const runtime::OpContext& context,
                                                       absl::Span<const Tensor* const> tensors,
                                                       absl::Span<const int64_t> indices) {
  absl::StatusOr<cudaStream_t> stream = StreamFor(context.device, context.stream);
  if (!stream.ok()) return stream.status();
  COMMIR_CUDA_RETURN_IF_ERROR(cudaSetDevice(GpuFor(context.device).ordinal), "cudaSetDevice");
  absl::StatusOr<std::vector<Tensor>> results =
      !context.sliced.empty() && op.Is(OpKind::kMatmul)
          ? RunSlicedMatmul(op, context.device, *stream, tensors, context.sliced)
          : RunTensorOp(op, context.device, *stream, tensors, indices, context.donated);
  if (!results.ok()) return results.status();
  // Consumers on other streams wait for this event (DeviceBuffer::UseOn). Results that
  // share an operand's storage (reshape, reshard) keep the producer's record; a donated
  // operand moved into the result is no operand any more (on_device() is false), so its
  // buffer's record moves to this op.
  for (Tensor& result : *results) {
    DeviceBuffer* buffer = BufferOf(result);
    bool aliased = false;
    for (const Tensor* t : tensors) aliased |= t->on_device() && BufferOf(*t) == buffer;
    if (aliased) continue;
    if (absl::Status s = buffer->MarkWritten(*stream); !s.ok()) return s;
  }
  return results;
}

absl::StatusOr<std::vector<Tensor>> CudaBackend::AllocateUnfilled(
    const Operation& full, const runtime::OpContext& context) {
  const Type type = full.result(0)->type();
  if (full.num_results() != 1 || !type.is_tensor()) {
    return absl::InvalidArgumentError("AllocateUnfilled: not a tensor-valued full");
  }
  absl::StatusOr<cudaStream_t> stream = StreamFor(context.device, context.stream);
  if (!stream.ok()) return stream.status();
  COMMIR_CUDA_RETURN_IF_ERROR(cudaSetDevice(GpuFor(context.device).ordinal), "cudaSetDevice");
  absl::StatusOr<Tensor> buffer =
      Allocate(context.device, *stream, type.element_type(), type.dims());
  if (!buffer.ok()) return buffer.status();
  // Its first writer orders after the allocation on this stream, as after a fill.
  if (absl::Status s = BufferOf(*buffer)->MarkWritten(*stream); !s.ok()) return s;
  std::vector<Tensor> results;
  results.push_back(*std::move(buffer));
  return results;
}

absl::StatusOr<bool> CudaBackend::RunMatmulInto(const Operation& matmul,
                                                const runtime::OpContext& context,
                                                absl::Span<const Tensor* const> tensors,
                                                const Operation& update, int64_t offset,
                                                Tensor& destination) {
  if (!matmul.Is(OpKind::kMatmul) || tensors.size() != 2 || !destination.on_device()) {
    return false;
  }
  const ElementType c_type = destination.element_type();
  const ElementType ab_type = tensors[0]->element_type();
  auto shape_of = [&](size_t i) -> absl::Span<const int64_t> {
    const runtime::SlicedOperand* view = i < context.sliced.size() ? context.sliced[i] : nullptr;
    return view != nullptr ? view->shape : tensors[i]->shape();
  };
  // Operands and destination that are one matrix each ([1, S, H] as [S, H]): their last
  // two dimensions.
  absl::Span<const int64_t> a_shape = shape_of(0);
  absl::Span<const int64_t> b_shape = shape_of(1);
  if (!runtime::IsOneMatrix(a_shape) || !runtime::IsOneMatrix(b_shape) ||
      !runtime::IsOneMatrix(destination.shape())) {
    return false;
  }
  a_shape = a_shape.subspan(a_shape.size() - 2);
  b_shape = b_shape.subspan(b_shape.size() - 2);
  const int64_t rank = destination.rank();
  const int64_t matrix_dim = runtime::MatrixDimOf(update.RequiredIntAttr("dim"), rank);
  if (matrix_dim < 0 ||
      !tensors[0]->on_device() || !tensors[1]->on_device() ||
      tensors[1]->element_type() != ab_type || matmul.result(0)->type().element_type() != c_type ||
      !GemmSupportsDirectly(ab_type, c_type)) {
    return false;
  }
  GemmArgs args;
  args.ab_type = ab_type;
  args.c_type = c_type;
  args.transpose_a = matmul.BoolAttr("transpose_a");
  args.transpose_b = matmul.BoolAttr("transpose_b");
  args.m = a_shape[args.transpose_a ? 1 : 0];
  args.k = a_shape[args.transpose_a ? 0 : 1];
  args.n = b_shape[args.transpose_b ? 0 : 1];
  if (b_shape[args.transpose_b ? 1 : 0] != args.k) return false;
  const std::optional<runtime::MatrixBlock> place =
      runtime::PlaceBlock(destination.dim(rank - 2), destination.dim(rank - 1), matrix_dim,
                          offset, args.m, args.n);
  if (!place.has_value()) return false;
  absl::StatusOr<cudaStream_t> stream = StreamFor(context.device, context.stream);
  if (!stream.ok()) return stream.status();
  COMMIR_CUDA_RETURN_IF_ERROR(cudaSetDevice(GpuFor(context.device).ordinal), "cudaSetDevice");
  absl::StatusOr<MatrixOperand> a = MatrixOperandOf(context.device, *stream, tensors, context.sliced, 0);
  if (!a.ok()) return a.status();
  absl::StatusOr<MatrixOperand> b = MatrixOperandOf(context.device, *stream, tensors, context.sliced, 1);
  if (!b.ok()) return b.status();
  // The destination's producer, and its earlier readers on other streams, come first.
  absl::StatusOr<const void*> c_ptr = Operand(context.device, *stream, destination);
  if (!c_ptr.ok()) return c_ptr.status();
  DeviceBuffer* buffer = BufferOf(destination);
  if (absl::Status s = buffer->WaitForUsers(*stream); !s.ok()) return s;
  args.a = a->data;
  args.b = b->data;
  args.lda = a->row_stride;
  args.ldb = b->row_stride;
  args.c = static_cast<char*>(buffer->data()) + place->first * ElementTypeByteWidth(c_type);
  args.ldc = place->row_stride;
  if (absl::Status s = GpuFor(context.device).gemm->Run(args, *stream); !s.ok()) return s;
  if (absl::Status s = buffer->MarkWritten(*stream); !s.ok()) return s;
  return true;
}

absl::StatusOr<bool> CudaBackend::RunShiftInto(const Operation& shift,
                                               const runtime::CollectiveContext& context,
                                               absl::Span<const Tensor* const> parts,
                                               const Operation& update,
                                               absl::Span<const int64_t> offsets,
                                               absl::Span<Tensor* const> destinations) {
  const size_t members = parts.size();
  if (!shift.Is(OpKind::kShift) || members == 0 || members != context.local.size() ||
      members != context.streams.size() || offsets.size() != members ||
      destinations.size() != members ||
      (!context.sliced.empty() && context.sliced.size() != members)) {
    return false;
  }
  // A ring's carried block (CollectiveContext::sliced) is sent from its slot.
  const bool carried = !context.sliced.empty();
  auto view_of = [&](size_t i) { return carried ? context.sliced[i] : nullptr; };
  auto shape_of = [&](size_t i) -> absl::Span<const int64_t> {
    return view_of(i) != nullptr ? view_of(i)->shape : parts[i]->shape();
  };
  const ElementType type = parts[0]->element_type();
  const int64_t element_bytes = ElementTypeByteWidth(type);
  const comm::Route route = engine_->RouteOf(comm::CollectiveKind::kShift, context.group);
  // Every member's slot is planned before anything is issued: a decline leaves every
  // destination as it was.
  std::vector<ShiftSlot> slots;
  std::vector<int64_t> send_offsets(members, 0);  // bytes into parts[i]
  for (size_t i = 0; i < members; ++i) {
    const Tensor& part = *parts[i];
    const Tensor& destination = *destinations[i];
    if (!part.on_device() || !destination.on_device() || part.element_type() != type ||
        destination.element_type() != type || shape_of(i) != shape_of(0)) {
      return false;
    }
    std::optional<ShiftSlot> slot =
        PlanShiftSlot(destination.shape(), shape_of(i), update.RequiredIntAttr("dim"), offsets[i],
                      element_bytes, route);
    if (!slot.has_value() || slot->receive == SlotReceive::kStaged) return false;
    if (const runtime::SlicedOperand* view = view_of(i); view != nullptr) {
      const std::optional<int64_t> from = ContiguousBlockByteOffset(
          part.shape(), view->dim, view->offset, view->shape[view->dim], element_bytes);
      if (!from.has_value()) return false;
      send_offsets[i] = *from;
    }
    slots.push_back(*slot);
  }
  int64_t block_elements = 1;
  for (int64_t extent : shape_of(0)) block_elements *= extent;  // a block of an allocated tensor
  cudaGetLastError();  // not this op's: see RunTensorOp
  std::vector<comm::MemberBuffers> buffers(members);
  std::vector<cudaStream_t> streams(members);
  for (size_t i = 0; i < members; ++i) {
    const int64_t device = context.group[context.local[i]];
    absl::StatusOr<cudaStream_t> stream = StreamFor(device, context.streams[i]);
    if (!stream.ok()) return stream.status();
    streams[i] = *stream;
    COMMIR_CUDA_RETURN_IF_ERROR(cudaSetDevice(GpuFor(device).ordinal), "cudaSetDevice");
    absl::StatusOr<const void*> in = nullptr;
    if (view_of(i) != nullptr) {
      // The block was received into its slot by the step before: wait for that receive
      // only (the whole buffer's record may be a later write of another slot).
      DeviceBuffer* from = BufferOf(*parts[i]);
      if (absl::Status s = from->UseSlotOn(send_offsets[i], *stream); !s.ok()) return s;
      in = static_cast<const void*>(static_cast<const char*>(from->data()) + send_offsets[i]);
    } else {
      in = Operand(device, *stream, *parts[i]);
    }
    if (!in.ok()) return in.status();
    // The destination's producer, and its earlier readers on other streams, come first.
    absl::StatusOr<const void*> out = Operand(device, *stream, *destinations[i]);
    if (!out.ok()) return out.status();
    DeviceBuffer* buffer = BufferOf(*destinations[i]);
    if (absl::Status s = buffer->WaitForUsers(*stream); !s.ok()) return s;
    buffers[i].device = device;
    buffers[i].stream = *stream;
    buffers[i].send = *in;
    buffers[i].recv = static_cast<char*>(buffer->data()) + slots[i].byte_offset;
    if (slots[i].receive == SlotReceive::kStrided2D) {
      buffers[i].recv_rows = slots[i].rows;
      buffers[i].recv_pitch = slots[i].pitch;
    }
  }
  absl::Status shifted =
      engine_->Shift(context.group, buffers, block_elements, type, shift.IntAttr("offset"));
  if (!shifted.ok()) return shifted;
  // Same-GPU copies may touch one member's buffers from another member's stream (see
  // RunCollective): keep them alive for every member's stream on their GPU.
  if (members > 1) {
    for (size_t i = 0; i < members; ++i) {
      for (const Tensor* tensor : {parts[i], static_cast<const Tensor*>(destinations[i])}) {
        for (size_t j = 0; j < members; ++j) {
          if (j == i || GpuOf(buffers[j].device) != BufferOf(*tensor)->gpu()) continue;
          if (absl::Status s = BufferOf(*tensor)->UseOn(streams[j]); !s.ok()) return s;
        }
      }
    }
  }
  cudaGetLastError();  // what NCCL may have left behind (RunCollective)
  for (size_t i = 0; i < members; ++i) {
    if (absl::Status s = BufferOf(*destinations[i])->MarkWritten(streams[i]); !s.ok()) return s;
    // The next step's readers of a carried block wait for this slot's receive only.
    if (!carried) continue;
    if (absl::Status s = BufferOf(*destinations[i])->MarkSlotWritten(slots[i].byte_offset,
                                                                    streams[i]);
        !s.ok()) {
      return s;
    }
  }
  return true;
}

bool CudaBackend::ReceivesCarriedBlockInSlot(const runtime::CarriedRing& ring) const {
  const Type gathered = ring.update->operand(0)->type();
  const Type block = ring.update->operand(1)->type();
  int64_t dim = ring.update->attrs().GetInt("dim", 0);
  if (dim < 0) dim += gathered.rank();
  if (dim < 0 || dim >= block.rank()) return false;
  return CarriedBlockContiguous(gathered.dims(), dim, block.dims()[dim]);
}

bool CudaBackend::IsCarriedBlock(const runtime::SlicedOperand& view) {
  return view.slice != nullptr && view.slice->Is(OpKind::kDynamicUpdateSlice);
}

absl::StatusOr<Tensor> CudaBackend::CopyCarriedBlock(int64_t device, cudaStream_t stream,
                                                     const runtime::SlicedOperand& view) {
  const Tensor& base = *view.base;
  const int64_t element_bytes = ElementTypeByteWidth(base.element_type());
  const std::optional<int64_t> from = ContiguousBlockByteOffset(
      base.shape(), view.dim, view.offset, view.shape[view.dim], element_bytes);
  if (!base.on_device() || !from.has_value()) {
    return absl::InternalError("a ring's carried block is not one contiguous range");
  }
  if (absl::Status s = BufferOf(base)->UseSlotOn(*from, stream); !s.ok()) return s;
  std::vector<int64_t> shape(view.shape.begin(), view.shape.end());
  absl::StatusOr<Tensor> block = Allocate(device, stream, base.element_type(), shape);
  if (!block.ok()) return block.status();
  COMMIR_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(BufferOf(*block)->data(),
                      static_cast<const char*>(BufferOf(base)->data()) + *from,
                      static_cast<size_t>(block->byte_size()), cudaMemcpyDeviceToDevice, stream),
      "cudaMemcpyAsync");
  if (absl::Status s = BufferOf(*block)->MarkWritten(stream); !s.ok()) return s;
  return block;
}

absl::StatusOr<CudaBackend::MatrixOperand> CudaBackend::MatrixOperandOf(
    int64_t device, cudaStream_t stream, absl::Span<const Tensor* const> tensors,
    absl::Span<const runtime::SlicedOperand* const> sliced, size_t i) {
  const runtime::SlicedOperand* view = i < sliced.size() ? sliced[i] : nullptr;
  const Tensor& tensor = *tensors[i];
  MatrixOperand operand;
  if (view != nullptr && IsCarriedBlock(*view)) {
    // A ring's carried block in its slot: wait for its own receive only (UseSlotOn).
    if (!tensor.on_device()) return absl::InternalError("a ring's block lies in host memory");
    const int64_t first = view->block.first * ElementTypeByteWidth(tensor.element_type());
    if (absl::Status s = BufferOf(tensor)->UseSlotOn(first, stream); !s.ok()) return s;
    operand.shape.assign(view->shape.begin(), view->shape.end());
    operand.data = static_cast<const char*>(BufferOf(tensor)->data()) + first;
    operand.row_stride = view->block.row_stride;
    return operand;
  }
  absl::StatusOr<const void*> base = Operand(device, stream, tensor);
  if (!base.ok()) return base.status();
  if (view == nullptr) {
    operand.shape = tensor.shape();
    operand.data = *base;
    operand.row_stride = tensor.rank() >= 1 ? tensor.dim(tensor.rank() - 1) : 0;
    return operand;
  }
  operand.shape.assign(view->shape.begin(), view->shape.end());
  operand.data = static_cast<const char*>(*base) +
                 view->block.first * ElementTypeByteWidth(tensor.element_type());
  operand.row_stride = view->block.row_stride;
  return operand;
}

absl::StatusOr<std::vector<Tensor>> CudaBackend::RunSlicedMatmul(
    const Operation& op, int64_t device, cudaStream_t stream, absl::Span<const Tensor* const> t,
    absl::Span<const runtime::SlicedOperand* const> sliced) {
  const ElementType ab_type = t[0]->element_type();
  const ElementType c_type = op.result(0)->type().element_type();
  const std::vector<int64_t>& result_dims = op.result(0)->type().dims();
  auto rank_of = [&](size_t i) {
    const runtime::SlicedOperand* view = i < sliced.size() ? sliced[i] : nullptr;
    return view != nullptr ? view->shape.size() : t[i]->shape().size();
  };
  if (t.size() == 2 && rank_of(0) == 2 && rank_of(1) == 2 && t[0]->on_device() &&
      t[1]->on_device() && t[1]->element_type() == ab_type && result_dims.size() == 2 &&
      GemmSupportsDirectly(ab_type, c_type)) {
    absl::StatusOr<MatrixOperand> a = MatrixOperandOf(device, stream, t, sliced, 0);
    if (!a.ok()) return a.status();
    absl::StatusOr<MatrixOperand> b = MatrixOperandOf(device, stream, t, sliced, 1);
    if (!b.ok()) return b.status();
    GemmArgs args;
    args.ab_type = ab_type;
    args.c_type = c_type;
    args.transpose_a = op.BoolAttr("transpose_a");
    args.transpose_b = op.BoolAttr("transpose_b");
    args.m = a->shape[args.transpose_a ? 1 : 0];
    args.k = a->shape[args.transpose_a ? 0 : 1];
    args.n = b->shape[args.transpose_b ? 0 : 1];
    if (b->shape[args.transpose_b ? 1 : 0] != args.k || result_dims[0] != args.m ||
        result_dims[1] != args.n) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "matmul: [%s] x [%s] does not give [%s]", absl::StrJoin(a->shape, ", "),
          absl::StrJoin(b->shape, ", "), absl::StrJoin(result_dims, ", ")));
    }
    args.a = a->data;
    args.b = b->data;
    args.lda = a->row_stride;
    args.ldb = b->row_stride;
    absl::StatusOr<Tensor> result = Allocate(device, stream, c_type, result_dims);
    if (!result.ok()) return result.status();
    args.c = BufferOf(*result)->data();
    if (absl::Status s = GpuFor(device).gemm->Run(args, stream); !s.ok()) return s;
    std::vector<Tensor> results;
    results.push_back(*std::move(result));
    return results;
  }
  // Batches and converted results: slice the blocks first, as the ops would.
  std::vector<Tensor> blocks(t.size());
  std::vector<const Tensor*> operands(t.begin(), t.end());
  for (size_t i = 0; i < t.size(); ++i) {
    const runtime::SlicedOperand* view = i < sliced.size() ? sliced[i] : nullptr;
    if (view == nullptr) continue;
    const Tensor* base = view->base;
    if (IsCarriedBlock(*view)) {
      // No slice op to run: copy the block (contiguous, ReceivesCarriedBlockInSlot) out
      // of its slot.
      absl::StatusOr<Tensor> copy = CopyCarriedBlock(device, stream, *view);
      if (!copy.ok()) return copy.status();
      blocks[i] = *std::move(copy);
      operands[i] = &blocks[i];
      continue;
    }
    absl::StatusOr<std::vector<Tensor>> block = RunTensorOp(
        *view->slice, device, stream, absl::MakeConstSpan(&base, 1),
        absl::MakeConstSpan(&view->offset, 1));
    if (!block.ok()) return block.status();
    if (block->size() != 1) return absl::InternalError("a dynamic_slice with several results");
    blocks[i] = std::move((*block)[0]);
    if (absl::Status s = BufferOf(blocks[i])->MarkWritten(stream); !s.ok()) return s;
    operands[i] = &blocks[i];
  }
  return RunTensorOp(op, device, stream, operands, {});
}

absl::StatusOr<std::vector<Tensor>> CudaBackend::RunTensorOp(
    const Operation& op, int64_t device, cudaStream_t stream, absl::Span<const Tensor* const> t,
    absl::Span<const int64_t> indices, runtime::Tensor* donated) {
  TensorLauncher launcher = CudaTensorLaunchers().Find(op.kind());
  if (launcher == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat("the cuda backend does not run '", op.name(), "' as a tensor op"));
  }
  // The kernel launchers report cudaGetLastError(): drop a non-sticky error that an
  // earlier call on this thread left behind without failing (NCCL or cuBLASLt internals,
  // an event poll), so that it is not blamed on this op. Sticky errors stay.
  cudaGetLastError();
  LaunchContext context{.op = op,
                        .operands = t,
                        .in = {},
                        .indices = indices,
                        .stream = stream,
                        .error_flag = GpuFor(device).error_flag,
                        .gemm = GpuFor(device).gemm.get(),
                        .allocate = [this, device, stream](ElementType type,
                                                           std::vector<int64_t> shape) {
                          return Allocate(device, stream, type, std::move(shape));
                        },
                        .donated = donated};
  // Operand pointers (waits included) for every tensor operand.
  for (const Tensor* tensor : t) {
    absl::StatusOr<const void*> ptr = Operand(device, stream, *tensor);
    if (!ptr.ok()) return ptr.status();
    context.in.push_back(*ptr);
  }
  return launcher(context);
}

// Collectives on the engine's contiguous blocks, with transposes before and after as
// the op's geometry says (collective_kernels.h).
absl::StatusOr<std::vector<Tensor>> CudaBackend::RunCollective(
    const Operation& op, const runtime::CollectiveContext& context,
    absl::Span<const Tensor* const> parts) {
  const int64_t n = static_cast<int64_t>(context.group.size());
  const size_t members = parts.size();
  if (members == 0 || members != context.local.size() || members != context.streams.size()) {
    return absl::InternalError("a collective without matching local members and streams");
  }
  const Tensor& first = *parts[0];
  const ElementType type = first.element_type();
  const std::vector<int64_t>& shape = first.shape();
  const int64_t rank = first.rank();
  for (const Tensor* part : parts) {
    if (part->element_type() != type || part->shape() != shape) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "group members hold %s and %s; a collective needs one type and shape",
          first.DebugTypeString(), part->DebugTypeString()));
    }
  }
  const CollectiveKernel kernel = CudaCollectiveKernels().Find(op.kind());
  if (!kernel) {
    return absl::UnimplementedError(
        absl::StrCat("'", op.name(), "' is not a collective the cuda backend knows"));
  }
  absl::StatusOr<CollectiveGeometry> geometry = kernel.plan(op, shape, first.DebugTypeString(), n);
  if (!geometry.ok()) return geometry.status();
  const int64_t pre_dim = geometry->pre_dim;
  const int64_t post_dim = geometry->post_dim;
  const std::vector<int64_t>& recv_shape = geometry->recv_shape;
  const std::vector<int64_t>& result_shape = geometry->result_shape;

  cudaGetLastError();  // not this op's: see RunTensorOp
  std::vector<comm::MemberBuffers> buffers(members);
  std::vector<Tensor> sends(members), recvs(members), results(members);
  std::vector<cudaStream_t> streams(members);
  for (size_t i = 0; i < members; ++i) {
    const int64_t device = context.group[context.local[i]];
    absl::StatusOr<cudaStream_t> stream = StreamFor(device, context.streams[i]);
    if (!stream.ok()) return stream.status();
    streams[i] = *stream;
    COMMIR_CUDA_RETURN_IF_ERROR(cudaSetDevice(GpuFor(device).ordinal), "cudaSetDevice");
    absl::StatusOr<const void*> in = Operand(device, *stream, *parts[i]);
    if (!in.ok()) return in.status();
    buffers[i].device = device;
    buffers[i].stream = *stream;
    buffers[i].send = *in;
    sends[i] = *parts[i];
    if (pre_dim >= 0) {
      // [.., n, x_d / n, ..] -> [n, .., x_d / n, ..]
      std::vector<int64_t> split = shape;
      split[pre_dim] /= n;
      split.insert(split.begin() + pre_dim, n);
      std::vector<int64_t> perm = MovePerm(rank + 1, pre_dim, 0);
      absl::StatusOr<Tensor> send = Allocate(device, *stream, type, shape);
      if (!send.ok()) return send.status();
      absl::Status launched = KernelLaunchStatus(
          k::LaunchTranspose(type, *in, split, perm, BufferOf(*send)->data(), *stream), op);
      if (!launched.ok()) return launched;
      buffers[i].send = BufferOf(*send)->data();
      sends[i] = *std::move(send);
    }
    absl::StatusOr<Tensor> recv = Allocate(device, *stream, type, recv_shape);
    if (!recv.ok()) return recv.status();
    buffers[i].recv = BufferOf(*recv)->data();
    recvs[i] = *std::move(recv);
  }

  const int64_t count = first.num_elements();
  if (absl::Status s = kernel.run(*engine_, op, context.group, buffers, count, type); !s.ok()) {
    return s;
  }

  // When several members are local, the engine may touch one member's buffers from
  // another member's stream (same-GPU copies): keep every buffer alive for every
  // member's stream.
  if (members > 1) {
    for (size_t i = 0; i < members; ++i) {
      for (const Tensor* tensor : {&sends[i], &recvs[i]}) {
        if (!tensor->on_device()) continue;
        for (size_t j = 0; j < members; ++j) {
          if (GpuOf(buffers[j].device) != BufferOf(*tensor)->gpu() || j == i) continue;
          if (absl::Status s = BufferOf(*tensor)->UseOn(streams[j]); !s.ok()) return s;
        }
      }
    }
  }

  cudaGetLastError();  // what NCCL may have left behind is not the transposes' (RunTensorOp)
  for (size_t i = 0; i < members; ++i) {
    const int64_t device = buffers[i].device;
    if (post_dim < 0) {
      results[i] = Tensor::OnDevice(type, result_shape, recvs[i].shared_storage());
    } else {
      COMMIR_CUDA_RETURN_IF_ERROR(cudaSetDevice(GpuFor(device).ordinal), "cudaSetDevice");
      absl::StatusOr<Tensor> result = Allocate(device, streams[i], type, result_shape);
      if (!result.ok()) return result.status();
      std::vector<int64_t> perm = MovePerm(rank + 1, 0, post_dim);
      absl::Status launched =
          KernelLaunchStatus(k::LaunchTranspose(type, buffers[i].recv, recv_shape, perm,
                                                BufferOf(*result)->data(), streams[i]),
                             op);
      if (!launched.ok()) return launched;
      results[i] = *std::move(result);
    }
    if (absl::Status s = BufferOf(results[i])->MarkWritten(streams[i]); !s.ok()) return s;
  }
  return results;
}

absl::StatusOr<std::vector<Tensor>> CudaBackend::GatherParts(
    absl::Span<const Tensor* const> local_parts) {
  const std::vector<int64_t> local = local_devices();
  if (local_parts.size() != local.size() || local.empty()) {
    return absl::InternalError("GatherParts needs one part per local device");
  }
  const ElementType type = local_parts[0]->element_type();
  const std::vector<int64_t>& shape = local_parts[0]->shape();
  std::vector<int64_t> group(plan_.mesh_size);
  for (int64_t d = 0; d < plan_.mesh_size; ++d) group[d] = d;
  std::vector<comm::MemberBuffers> buffers;
  std::vector<Tensor> held;
  for (size_t i = 0; i < local.size(); ++i) {
    if (local_parts[i]->element_type() != type || local_parts[i]->shape() != shape) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "devices return %s and %s for one result", local_parts[0]->DebugTypeString(),
          local_parts[i]->DebugTypeString()));
    }
    absl::StatusOr<Tensor> send = ToDevice(local[i], *local_parts[i]);
    if (!send.ok()) return send.status();
    absl::StatusOr<cudaStream_t> stream = StreamFor(local[i], 0);
    if (!stream.ok()) return stream.status();
    std::vector<int64_t> recv_shape = shape;
    recv_shape.insert(recv_shape.begin(), plan_.mesh_size);
    absl::StatusOr<Tensor> recv = Allocate(local[i], *stream, type, recv_shape);
    if (!recv.ok()) return recv.status();
    buffers.push_back({local[i], BufferOf(*send)->data(), BufferOf(*recv)->data(), *stream});
    held.push_back(*std::move(send));
    held.push_back(*std::move(recv));
  }
  if (absl::Status s = engine_->AllGather(group, buffers, local_parts[0]->num_elements(), type);
      !s.ok()) {
    return s;
  }
  Tensor& gathered = held[1];
  if (absl::Status s = BufferOf(gathered)->MarkWritten(buffers[0].stream); !s.ok()) return s;
  absl::StatusOr<Tensor> host = ToHost(gathered);
  if (!host.ok()) return host.status();
  std::vector<Tensor> parts;
  const int64_t bytes = local_parts[0]->byte_size();
  for (int64_t d = 0; d < plan_.mesh_size; ++d) {
    Tensor part(type, shape);
    std::memcpy(part.raw_data(), static_cast<const char*>(host->raw_data()) + d * bytes,
                static_cast<size_t>(bytes));
    parts.push_back(std::move(part));
  }
  return parts;
}

}  // namespace commir::cuda
