// The training-step pass's `optimizer` option: `sgd` (the default; its learning rate is
// the pass's `lr`) or `adamw{lr=...,beta1=...,beta2=...,eps=...,weight_decay=...}`,
// each hyperparameter typed and range-checked when the pipeline is parsed.
#ifndef COMMIR_TRANSFORMS_AUTODIFF_OPTIMIZER_OPTION_H_
#define COMMIR_TRANSFORMS_AUTODIFF_OPTIMIZER_OPTION_H_

#include <variant>

#include "transforms/autodiff/optimizer_update.h"
#include "transforms/option_schema.h"

namespace commir {

struct SgdOptimizerOption {
  static constexpr char kName[] = "sgd";
  static const OptionSchema<SgdOptimizerOption>& Schema();
};

struct AdamWOptimizerOption : AdamWHyperparameters {
  static constexpr char kName[] = "adamw";
  static const OptionSchema<AdamWOptimizerOption>& Schema();
};

using OptimizerOption = std::variant<SgdOptimizerOption, AdamWOptimizerOption>;

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_AUTODIFF_OPTIMIZER_OPTION_H_
