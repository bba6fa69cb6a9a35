// The optimizer arithmetic of a training step, emitted as CommIR ops: gradient clipping by
// the global norm and the AdamW update, each as PyTorch computes it, so that a step built
// here and the same step in PyTorch agree to rounding.
//
// Everything is elementwise or a full reduction of a global tensor, so a partitioned step
// keeps each param's layout: a split param's moments are split like it, and the global
// norm is each shard's squared sum, summed and all-reduced by the partitioner.
#ifndef COMMIR_TRANSFORMS_AUTODIFF_OPTIMIZER_UPDATE_H_
#define COMMIR_TRANSFORMS_AUTODIFF_OPTIMIZER_UPDATE_H_

#include <vector>

#include "absl/status/status.h"
#include "commir/builder.h"
#include "commir/ir.h"

namespace commir {

// torch.optim.AdamW's hyperparameters, with its defaults.
struct AdamWHyperparameters {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

// torch.optim.AdamW's own checks (0 <= lr, 0 <= eps, 0 <= beta < 1, 0 <= weight_decay),
// plus finiteness: InvalidArgument naming the hyperparameter.
absl::Status CheckAdamW(const AdamWHyperparameters& h);

// torch.nn.utils.clip_grad_norm_(params, max_norm) with the 2-norm: every gradient times
// min(1, max_norm / (norm + 1e-6)), where norm = sqrt(sum over the gradients of the sum
// of their squared elements), computed in each gradient's own element type (f32 for f32
// gradients, as torch does). Null gradients are skipped (the builder has failed).
std::vector<Value*> ClipByGlobalNorm(OpBuilder& b, const std::vector<Value*>& gradients,
                                     double max_norm);

// The step's bias-correction scalars, shared by every param: the step count becomes
// step + 1 (f32, as torch keeps it), and from it, in f64 as torch computes them in Python
// floats, step_size = lr / (1 - beta1^t) and sqrt(1 - beta2^t).
struct AdamWStepScalars {
  Value* next_step = nullptr;   // f32[]
  Value* step_size = nullptr;   // f64[]
  Value* bias2_sqrt = nullptr;  // f64[]
};
AdamWStepScalars EmitAdamWStepScalars(OpBuilder& b, Value* step, const AdamWHyperparameters& h);

// The step's scalars rounded to an update type (once per type, however many params).
struct AdamWTypedScalars {
  Value* step_size = nullptr;
  Value* bias2_sqrt = nullptr;
};
AdamWTypedScalars ConvertAdamWStepScalars(OpBuilder& b, const AdamWStepScalars& scalars,
                                          ElementType type);

// One param's AdamW update in `weight`'s element type (its update type: f32 master
// weights of a bf16 param, or the f32 param itself; `scalars` in that type),
// torch.optim.AdamW's single-tensor path operation for operation:
//   weight *= 1 - lr * weight_decay
//   m = m * beta1 + (1 - beta1) * g
//   v = v * beta2 + (1 - beta2) * g * g
//   weight -= step_size * m / (sqrt(v) / bias2_sqrt + eps)
// `gradient` is converted to the update type first.
struct AdamWParamUpdate {
  Value* weight = nullptr;
  Value* m = nullptr;
  Value* v = nullptr;
};
AdamWParamUpdate EmitAdamWUpdate(OpBuilder& b, const AdamWHyperparameters& h,
                                 const AdamWTypedScalars& scalars, Value* weight,
                                 Value* gradient, Value* m, Value* v);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_AUTODIFF_OPTIMIZER_UPDATE_H_
