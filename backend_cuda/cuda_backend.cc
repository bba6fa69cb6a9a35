#include "backend_cuda/cuda_backend.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend_cuda/cuda_status.h"
#include "backend_cuda/kernels/attention.h"
#include "backend_cuda/kernels/dtype.h"
#include "backend_cuda/kernels/elementwise.h"
#include "backend_cuda/kernels/layout.h"
#include "backend_cuda/kernels/reduce.h"
#include "commir/attention_op.h"
#include "commir/check.h"

namespace commir::cuda {
namespace {

using runtime::Tensor;
namespace k = ::commir::cuda_kernels;

// KDType mirrors ElementType enumerator for enumerator (kernels/dtype.h).
static_assert(static_cast<int>(k::KDType::kF64) == static_cast<int>(ElementType::kF64) &&
              static_cast<int>(k::KDType::kF32) == static_cast<int>(ElementType::kF32) &&
              static_cast<int>(k::KDType::kF16) == static_cast<int>(ElementType::kF16) &&
              static_cast<int>(k::KDType::kBF16) == static_cast<int>(ElementType::kBF16) &&
              static_cast<int>(k::KDType::kI64) == static_cast<int>(ElementType::kI64) &&
              static_cast<int>(k::KDType::kI32) == static_cast<int>(ElementType::kI32) &&
              static_cast<int>(k::KDType::kI1) == static_cast<int>(ElementType::kI1));
k::KDType KD(ElementType type) { return static_cast<k::KDType>(static_cast<uint8_t>(type)); }

absl::Status Launch(cudaError_t error, const Operation& op) {
  if (error == cudaErrorInvalidValue) {
    // The kernels' answer to a combination they do not support.
    return absl::UnimplementedError(absl::StrFormat(
        "the cuda kernels do not support '%s' on these operands (cudaErrorInvalidValue)",
        op.name()));
  }
  return CudaStatus(error, absl::StrCat("launching '", op.name(), "'"));
}

std::vector<int64_t> IntList(const Operation& op, absl::string_view key) {
  return op.RequiredIntListAttr(key);
}

int64_t NormalizeDim(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

k::KUnaryOp ToUnary(const Operation& op) {
  switch (op.kind()) {
    case OpKind::kNeg: return k::KUnaryOp::kNeg;
    case OpKind::kAbs: return k::KUnaryOp::kAbs;
    case OpKind::kExp: return k::KUnaryOp::kExp;
    case OpKind::kLog: return k::KUnaryOp::kLog;
    case OpKind::kSqrt: return k::KUnaryOp::kSqrt;
    case OpKind::kRsqrt: return k::KUnaryOp::kRsqrt;
    case OpKind::kTanh: return k::KUnaryOp::kTanh;
    case OpKind::kSigmoid: return k::KUnaryOp::kSigmoid;
    case OpKind::kRelu: return k::KUnaryOp::kRelu;
    case OpKind::kSilu: return k::KUnaryOp::kSilu;
    default:
      return op.EnumAttr("approximate") == "tanh" ? k::KUnaryOp::kGeluTanh
                                                  : k::KUnaryOp::kGeluErf;
  }
}

k::KBinaryOp ToBinary(OpKind kind) {
  switch (kind) {
    case OpKind::kAdd: return k::KBinaryOp::kAdd;
    case OpKind::kSub: return k::KBinaryOp::kSub;
    case OpKind::kMul: return k::KBinaryOp::kMul;
    case OpKind::kDiv: return k::KBinaryOp::kDiv;
    case OpKind::kMax: return k::KBinaryOp::kMax;
    case OpKind::kMin: return k::KBinaryOp::kMin;
    default: return k::KBinaryOp::kPow;
  }
}

comm::ReduceKind ToReduceKind(absl::string_view name) {
  if (name == "max") return comm::ReduceKind::kMax;
  if (name == "min") return comm::ReduceKind::kMin;
  return comm::ReduceKind::kSum;
}

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
  // timeout, not a silent hang (spec issue 6).
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
      RunTensorOp(op, context.device, *stream, tensors, indices);
  if (!results.ok()) return results.status();
  // Consumers on other streams wait for this event (DeviceBuffer::UseOn). Results that
  // share an operand's storage (reshape, reshard) keep the producer's record.
  for (Tensor& result : *results) {
    DeviceBuffer* buffer = BufferOf(result);
    bool aliased = false;
    for (const Tensor* t : tensors) aliased |= t->on_device() && BufferOf(*t) == buffer;
    if (aliased) continue;
    if (absl::Status s = buffer->MarkWritten(*stream); !s.ok()) return s;
  }
  return results;
}

absl::StatusOr<std::vector<Tensor>> CudaBackend::RunTensorOp(
    const Operation& op, int64_t device, cudaStream_t stream, absl::Span<const Tensor* const> t,
    absl::Span<const int64_t> indices) {
  const Type result_type = op.num_results() > 0 ? op.result(0)->type() : Type();
  auto one = [](absl::StatusOr<Tensor> result) -> absl::StatusOr<std::vector<Tensor>> {
    if (!result.ok()) return result.status();
    std::vector<Tensor> out;
    out.push_back(*std::move(result));
    return out;
  };
  // The kernel launchers report cudaGetLastError(): drop a non-sticky error that an
  // earlier call on this thread left behind without failing (NCCL or cuBLASLt internals,
  // an event poll), so that it is not blamed on this op. Sticky errors stay.
  cudaGetLastError();
  // Operand pointers (waits included) for every tensor operand.
  std::vector<const void*> in;
  for (const Tensor* tensor : t) {
    absl::StatusOr<const void*> ptr = Operand(device, stream, *tensor);
    if (!ptr.ok()) return ptr.status();
    in.push_back(*ptr);
  }
  auto output = [&](ElementType type, std::vector<int64_t> shape) {
    return Allocate(device, stream, type, std::move(shape));
  };
  auto out_ptr = [](Tensor& tensor) { return BufferOf(tensor)->data(); };
  int32_t* flag = GpuFor(device).error_flag;

  switch (op.kind()) {
    case OpKind::kNeg:
    case OpKind::kAbs:
    case OpKind::kExp:
    case OpKind::kLog:
    case OpKind::kSqrt:
    case OpKind::kRsqrt:
    case OpKind::kTanh:
    case OpKind::kSigmoid:
    case OpKind::kRelu:
    case OpKind::kSilu:
    case OpKind::kGelu: {
      absl::StatusOr<Tensor> y = output(t[0]->element_type(), t[0]->shape());
      if (!y.ok()) return y.status();
      if (absl::Status s = Launch(k::LaunchUnary(ToUnary(op), KD(t[0]->element_type()), in[0],
                                                 out_ptr(*y), t[0]->num_elements(), stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    case OpKind::kConvert: {
      absl::StatusOr<Tensor> y = output(result_type.element_type(), t[0]->shape());
      if (!y.ok()) return y.status();
      if (absl::Status s = Launch(k::LaunchConvert(KD(t[0]->element_type()), in[0],
                                                   KD(result_type.element_type()), out_ptr(*y),
                                                   t[0]->num_elements(), stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kMax:
    case OpKind::kMin:
    case OpKind::kPow: {
      absl::StatusOr<Tensor> y = output(result_type.element_type(), result_type.dims());
      if (!y.ok()) return y.status();
      if (absl::Status s = Launch(k::LaunchBinary(ToBinary(op.kind()), KD(t[0]->element_type()),
                                                  in[0], t[0]->shape(), in[1], t[1]->shape(),
                                                  out_ptr(*y), y->shape(), flag, stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    case OpKind::kFull: {
      absl::StatusOr<Tensor> y = output(result_type.element_type(), result_type.dims());
      if (!y.ok()) return y.status();
      if (absl::Status s = Launch(k::LaunchFill(KD(y->element_type()), out_ptr(*y),
                                                y->num_elements(), op.RequiredNumberAttr("value"),
                                                stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    case OpKind::kMatmul:
      return one(MatMul(op, device, stream, *t[0], *t[1]));
    case OpKind::kReduceSum:
    case OpKind::kReduceMax:
    case OpKind::kReduceMean: {
      k::KReduceOp reduce = op.Is(OpKind::kReduceSum)   ? k::KReduceOp::kSum
                            : op.Is(OpKind::kReduceMax) ? k::KReduceOp::kMax
                                                        : k::KReduceOp::kMean;
      // keepdim only changes the shape: the bytes are the same.
      absl::StatusOr<Tensor> y = output(result_type.element_type(), result_type.dims());
      if (!y.ok()) return y.status();
      std::vector<int64_t> dims = IntList(op, "dims");
      if (absl::Status s = Launch(k::LaunchReduce(reduce, KD(t[0]->element_type()), in[0],
                                                  t[0]->shape(), dims, out_ptr(*y), flag, stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    case OpKind::kSoftmax: {
      absl::StatusOr<Tensor> y = output(t[0]->element_type(), t[0]->shape());
      if (!y.ok()) return y.status();
      if (absl::Status s = Launch(k::LaunchSoftmax(KD(t[0]->element_type()), in[0], t[0]->shape(),
                                                   op.IntAttr("dim"), out_ptr(*y), stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    case OpKind::kLayerNorm:
    case OpKind::kRmsNorm: {
      absl::StatusOr<Tensor> y = output(t[0]->element_type(), t[0]->shape());
      if (!y.ok()) return y.status();
      const int64_t n = t[0]->rank() == 0 ? 1 : t[0]->shape().back();
      const int64_t rows = n == 0 ? 0 : t[0]->num_elements() / n;
      cudaError_t error =
          op.Is(OpKind::kLayerNorm)
              ? k::LaunchLayerNorm(KD(t[0]->element_type()), in[0], rows, n,
                                   KD(t[1]->element_type()), in[1], KD(t[2]->element_type()),
                                   in[2], op.NumberAttr("eps"), out_ptr(*y), stream)
              : k::LaunchRmsNorm(KD(t[0]->element_type()), in[0], rows, n,
                                 KD(t[1]->element_type()), in[1], op.NumberAttr("eps"),
                                 out_ptr(*y), stream);
      if (absl::Status s = Launch(error, op); !s.ok()) return s;
      return one(std::move(y));
    }
    case OpKind::kAttention: {
      const Tensor& q = *t[0];
      const Tensor& key = *t[1];
      const Tensor& v = *t[2];
      if (q.rank() != 4 || key.rank() != 4 || v.rank() != 4) {
        return absl::InvalidArgumentError("attention: q, k and v must be rank 4");
      }
      k::KAttentionArgs args;
      args.dtype = KD(q.element_type());
      args.batch = q.dim(0);
      args.heads = q.dim(1);
      args.sq = q.dim(2);
      args.d = q.dim(3);
      args.kv_heads = key.dim(1);
      args.skv = key.dim(2);
      args.dv = v.dim(3);
      if (args.kv_heads == 0 || args.heads % args.kv_heads != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "attention: %d query heads are not a multiple of %d kv heads", args.heads,
            args.kv_heads));
      }
      args.causal = op.BoolAttr("causal");
      args.scale = AttentionOp(op).scale(args.d);
      args.q_pos = !indices.empty() ? indices[0] : args.skv - args.sq;
      args.k_pos = indices.size() > 1 ? indices[1] : 0;
      args.q = in[0];
      args.k = in[1];
      args.v = in[2];
      absl::StatusOr<Tensor> out = output(q.element_type(), {args.batch, args.heads, args.sq, args.dv});
      if (!out.ok()) return out.status();
      args.out = out_ptr(*out);
      std::vector<Tensor> results;
      results.push_back(*std::move(out));
      if (op.num_results() == 2) {
        absl::StatusOr<Tensor> lse = output(ElementType::kF32, {args.batch, args.heads, args.sq});
        if (!lse.ok()) return lse.status();
        args.lse = static_cast<float*>(out_ptr(*lse));
        results.push_back(*std::move(lse));
      }
      if (absl::Status s = Launch(k::LaunchAttention(args, stream), op); !s.ok()) return s;
      return results;
    }
    case OpKind::kReshape:
    case OpKind::kReshard: {
      // Row-major data does not move: the result shares the operand's buffer (values are
      // immutable; dynamic_update_slice writes into a copy).
      std::vector<int64_t> shape = op.Is(OpKind::kReshape) ? result_type.dims() : t[0]->shape();
      if (runtime::NumElements(shape) != t[0]->num_elements()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "reshape of %s to %d elements", t[0]->DebugTypeString(), runtime::NumElements(shape)));
      }
      if (!t[0]->on_device()) {
        // A literal reshaped: materialise it.
        absl::StatusOr<Tensor> y = output(t[0]->element_type(), shape);
        if (!y.ok()) return y.status();
        COMMIR_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out_ptr(*y), in[0], t[0]->byte_size(),
                                                    cudaMemcpyDeviceToDevice, stream),
                                    "cudaMemcpyAsync");
        return one(std::move(y));
      }
      return one(Tensor::OnDevice(t[0]->element_type(), std::move(shape), t[0]->shared_storage()));
    }
    case OpKind::kTranspose: {
      std::vector<int64_t> perm = IntList(op, "perm");
      std::vector<int64_t> shape;
      for (int64_t p : perm) shape.push_back(t[0]->dim(NormalizeDim(p, t[0]->rank())));
      absl::StatusOr<Tensor> y = output(t[0]->element_type(), shape);
      if (!y.ok()) return y.status();
      if (absl::Status s = Launch(k::LaunchTranspose(KD(t[0]->element_type()), in[0],
                                                     t[0]->shape(), perm, out_ptr(*y), stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    case OpKind::kSlice: {
      std::vector<int64_t> start = IntList(op, "start");
      std::vector<int64_t> size = IntList(op, "size");
      absl::StatusOr<Tensor> y = output(t[0]->element_type(), size);
      if (!y.ok()) return y.status();
      if (absl::Status s = Launch(k::LaunchSlice(KD(t[0]->element_type()), in[0], t[0]->shape(),
                                                 start, size, out_ptr(*y), stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    case OpKind::kConcat: {
      absl::StatusOr<Tensor> y = output(result_type.element_type(), result_type.dims());
      if (!y.ok()) return y.status();
      std::vector<std::span<const int64_t>> shapes;
      for (const Tensor* part : t) shapes.emplace_back(part->shape().data(), part->shape().size());
      if (absl::Status s = Launch(k::LaunchConcat(KD(y->element_type()), in, shapes,
                                                  NormalizeDim(op.RequiredIntAttr("dim"), y->rank()),
                                                  out_ptr(*y), stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    case OpKind::kBroadcast: {
      absl::StatusOr<Tensor> y = output(t[0]->element_type(), result_type.dims());
      if (!y.ok()) return y.status();
      if (absl::Status s = Launch(k::LaunchBroadcast(KD(t[0]->element_type()), in[0],
                                                     t[0]->shape(), out_ptr(*y), y->shape(),
                                                     stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    case OpKind::kDynamicSlice: {
      const int64_t dim = NormalizeDim(op.RequiredIntAttr("dim"), t[0]->rank());
      const int64_t size = op.RequiredIntAttr("size");
      const int64_t offset = indices[0];
      if (dim < 0 || dim >= t[0]->rank() || offset < 0 || size < 0 ||
          offset > t[0]->dim(dim) - size) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "dynamic_slice of %d elements at offset %d is out of range for dimension %d of %s",
            size, offset, dim, t[0]->DebugTypeString()));
      }
      std::vector<int64_t> shape = t[0]->shape();
      shape[dim] = size;
      absl::StatusOr<Tensor> y = output(t[0]->element_type(), shape);
      if (!y.ok()) return y.status();
      if (absl::Status s = Launch(k::LaunchDynamicSlice(KD(t[0]->element_type()), in[0],
                                                        t[0]->shape(), dim, offset, size,
                                                        out_ptr(*y), stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    case OpKind::kDynamicUpdateSlice: {
      const Tensor& x = *t[0];
      const Tensor& update = *t[1];
      const int64_t dim = NormalizeDim(op.RequiredIntAttr("dim"), x.rank());
      const int64_t offset = indices[0];
      if (dim < 0 || dim >= x.rank() || update.rank() != x.rank() || offset < 0 ||
          offset > x.dim(dim) - update.dim(dim)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "dynamic_update_slice of %s at offset %d is out of range for dimension %d of %s",
            update.DebugTypeString(), offset, dim, x.DebugTypeString()));
      }
      absl::StatusOr<Tensor> y = output(x.element_type(), x.shape());
      if (!y.ok()) return y.status();
      if (x.byte_size() > 0) {
        COMMIR_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(out_ptr(*y), in[0], x.byte_size(),
                                                    cudaMemcpyDeviceToDevice, stream),
                                    "copying the dynamic_update_slice operand");
      }
      if (absl::Status s = Launch(k::LaunchDynamicUpdateSliceInPlace(
                                      KD(x.element_type()), out_ptr(*y), x.shape(), in[1],
                                      update.dim(dim), dim, offset, stream),
                                  op);
          !s.ok()) {
        return s;
      }
      return one(std::move(y));
    }
    default:
      return absl::UnimplementedError(
          absl::StrCat("the cuda backend does not run '", op.name(), "' as a tensor op"));
  }
}

absl::StatusOr<Tensor> CudaBackend::MatMul(const Operation& op, int64_t device,
                                           cudaStream_t stream, const Tensor& a, const Tensor& b) {
  const bool ta = op.BoolAttr("transpose_a");
  const bool tb = op.BoolAttr("transpose_b");
  const ElementType c_type = op.result(0)->type().element_type();
  if (a.rank() < 2 || b.rank() < 2 || a.element_type() != b.element_type()) {
    return absl::InvalidArgumentError(absl::StrFormat("matmul of %s and %s", a.DebugTypeString(),
                                                      b.DebugTypeString()));
  }
  if (!IsFloatType(a.element_type()) || !IsFloatType(c_type)) {
    return absl::UnimplementedError(absl::StrFormat(
        "the cuda backend multiplies float matrices only (got %s -> %s)",
        ElementTypeName(a.element_type()), ElementTypeName(c_type)));
  }
  GemmArgs args;
  args.ab_type = a.element_type();
  args.m = a.dim(a.rank() - (ta ? 1 : 2));
  args.k = a.dim(a.rank() - (ta ? 2 : 1));
  args.n = b.dim(b.rank() - (tb ? 2 : 1));
  const int64_t b_k = b.dim(b.rank() - (tb ? 1 : 2));
  if (b_k != args.k) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "matmul: contraction sizes differ (%d and %d) for %s and %s", args.k, b_k,
        a.DebugTypeString(), b.DebugTypeString()));
  }
  args.transpose_a = ta;
  args.transpose_b = tb;
  absl::StatusOr<BatchPlan> batches = PlanBatches(
      absl::MakeConstSpan(a.shape()).subspan(0, a.rank() - 2),
      absl::MakeConstSpan(b.shape()).subspan(0, b.rank() - 2));
  if (!batches.ok()) return batches.status();
  std::vector<int64_t> shape = batches->batch_shape;
  shape.push_back(args.m);
  shape.push_back(args.n);

  // Products cuBLASLt cannot write directly (e.g. f32 -> bf16, f16 -> f64) go through
  // an f32 (f64 for f64 operands) buffer and a conversion that rounds to nearest even.
  const bool direct = GemmSupportsDirectly(args.ab_type, c_type);
  args.c_type = direct ? c_type : (args.ab_type == ElementType::kF64 ? ElementType::kF64
                                                                      : ElementType::kF32);
  absl::StatusOr<Tensor> c = Allocate(device, stream, args.c_type, shape);
  if (!c.ok()) return c.status();
  const void* a_ptr = BufferOf(a)->data();
  const void* b_ptr = BufferOf(b)->data();
  void* c_ptr = BufferOf(*c)->data();
  const int64_t a_matrix = args.m * args.k, b_matrix = args.k * args.n, c_matrix = args.m * args.n;
  Gpu& gpu = GpuFor(device);
  if (batches->strided) {
    args.a = a_ptr;
    args.b = b_ptr;
    args.c = c_ptr;
    args.batch = batches->batch;
    args.stride_a = batches->a_stride_matrices * a_matrix;
    args.stride_b = batches->b_stride_matrices * b_matrix;
    args.stride_c = c_matrix;
    if (absl::Status s = gpu.gemm->Run(args, stream); !s.ok()) return s;
  } else {
    // A broadcast one stride cannot express: one product per batch entry.
    const int a_width = ElementTypeByteWidth(args.ab_type);
    const int c_width = ElementTypeByteWidth(args.c_type);
    for (int64_t i = 0; i < batches->batch; ++i) {
      GemmArgs entry = args;
      entry.a = static_cast<const char*>(a_ptr) + batches->a_index[i] * a_matrix * a_width;
      entry.b = static_cast<const char*>(b_ptr) + batches->b_index[i] * b_matrix * a_width;
      entry.c = static_cast<char*>(c_ptr) + i * c_matrix * c_width;
      if (absl::Status s = gpu.gemm->Run(entry, stream); !s.ok()) return s;
    }
  }
  if (direct) return c;
  absl::StatusOr<Tensor> converted = Allocate(device, stream, c_type, shape);
  if (!converted.ok()) return converted.status();
  if (absl::Status s = Launch(k::LaunchConvert(KD(args.c_type), c_ptr, KD(c_type),
                                               BufferOf(*converted)->data(), c->num_elements(),
                                               stream),
                              op);
      !s.ok()) {
    return s;
  }
  return converted;
}

// Collectives along any dimension on the engine's contiguous, rank-major blocks:
//   all_gather dim d:      recv [n, part...] -> move axis 0 to d, merge it with dim d
//   reduce_scatter dim d:  x viewed [.., n, x_d / n, ..] -> move the n axis to the front
//   all_to_all s -> c:     like reduce_scatter on s before, like all_gather on c after
// A move is skipped when every dimension it crosses has extent 1 (the bytes are already
// in order), which is the common case of dim 0.
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
  auto prefix = [](absl::Span<const int64_t> dims, int64_t end) {
    int64_t p = 1;
    for (int64_t i = 0; i < end; ++i) p *= dims[i];
    return p;
  };
  // Geometry per op kind.
  int64_t pre_dim = -1;   // split this dim into n blocks and bring them to the front
  int64_t post_dim = -1;  // move the leading block axis of recv to this dim and merge
  std::vector<int64_t> recv_shape;    // as the engine fills it
  std::vector<int64_t> result_shape;  // as the op returns it
  switch (op.kind()) {
    case OpKind::kAllGather: {
      const int64_t d = NormalizeDim(op.RequiredIntAttr("dim"), rank);
      if (d < 0 || d >= rank) return absl::InvalidArgumentError("all_gather: dim out of range");
      recv_shape = shape;
      recv_shape.insert(recv_shape.begin(), n);
      result_shape = shape;
      result_shape[d] *= n;
      if (prefix(shape, d) != 1) post_dim = d;
      break;
    }
    case OpKind::kReduceScatter: {
      const int64_t d = NormalizeDim(op.RequiredIntAttr("dim"), rank);
      if (d < 0 || d >= rank || shape[d] % n != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "reduce_scatter: dimension %d of %s does not split into %d blocks",
            op.RequiredIntAttr("dim"), first.DebugTypeString(), n));
      }
      if (prefix(shape, d) != 1) pre_dim = d;
      recv_shape = shape;
      recv_shape[d] /= n;
      result_shape = recv_shape;
      break;
    }
    case OpKind::kAllToAll: {
      const int64_t sd = NormalizeDim(op.RequiredIntAttr("split_dim"), rank);
      const int64_t cd = NormalizeDim(op.RequiredIntAttr("concat_dim"), rank);
      if (sd < 0 || sd >= rank || cd < 0 || cd >= rank || shape[sd] % n != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "all_to_all: split_dim of %s does not split into %d blocks (or a dim is out of "
            "range)",
            first.DebugTypeString(), n));
      }
      if (prefix(shape, sd) != 1) pre_dim = sd;
      std::vector<int64_t> block = shape;
      block[sd] /= n;
      recv_shape = block;
      recv_shape.insert(recv_shape.begin(), n);
      result_shape = block;
      result_shape[cd] *= n;
      if (prefix(block, cd) != 1) post_dim = cd;
      break;
    }
    case OpKind::kAllReduce:
    case OpKind::kShift:
      recv_shape = shape;
      result_shape = shape;
      break;
    default:
      return absl::UnimplementedError(
          absl::StrCat("'", op.name(), "' is not a collective the cuda backend knows"));
  }

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
      if (absl::Status s = Launch(k::LaunchTranspose(KD(type), *in, split, perm,
                                                     BufferOf(*send)->data(), *stream),
                                  op);
          !s.ok()) {
        return s;
      }
      buffers[i].send = BufferOf(*send)->data();
      sends[i] = *std::move(send);
    }
    absl::StatusOr<Tensor> recv = Allocate(device, *stream, type, recv_shape);
    if (!recv.ok()) return recv.status();
    buffers[i].recv = BufferOf(*recv)->data();
    recvs[i] = *std::move(recv);
  }

  const int64_t count = first.num_elements();
  absl::Status status;
  switch (op.kind()) {
    case OpKind::kAllGather:
      status = engine_->AllGather(context.group, buffers, count, type);
      break;
    case OpKind::kReduceScatter:
      status = engine_->ReduceScatter(context.group, buffers, count, type,
                                      ToReduceKind(op.EnumAttr("reduce")));
      break;
    case OpKind::kAllReduce:
      status = engine_->AllReduce(context.group, buffers, count, type,
                                  ToReduceKind(op.EnumAttr("reduce")));
      break;
    case OpKind::kAllToAll:
      status = engine_->AllToAll(context.group, buffers, count, type);
      break;
    default:
      status = engine_->Shift(context.group, buffers, count, type, op.IntAttr("offset"));
      break;
  }
  if (!status.ok()) return status;

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
      if (absl::Status s = Launch(k::LaunchTranspose(KD(type), buffers[i].recv, recv_shape, perm,
                                                     BufferOf(*result)->data(), streams[i]),
                                  op);
          !s.ok()) {
        return s;
      }
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
