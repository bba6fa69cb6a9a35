#include "transforms/autodiff/optimizer_option.h"

namespace commir {

const OptionSchema<SgdOptimizerOption>& SgdOptimizerOption::Schema() {
  static const auto* schema = new OptionSchema<SgdOptimizerOption>();
  return *schema;
}

// The ranges are torch.optim.AdamW's own checks (its constructor raises outside them).
const OptionSchema<AdamWOptimizerOption>& AdamWOptimizerOption::Schema() {
  using O = AdamWOptimizerOption;
  static const auto* schema =
      &(*new OptionSchema<O>())
           .Number("lr", &O::lr, "The learning rate", 0.0)
           .Number("beta1", &O::beta1, "The first moment's decay", 0.0, 1.0,
                   /*max_exclusive=*/true)
           .Number("beta2", &O::beta2, "The second moment's decay", 0.0, 1.0,
                   /*max_exclusive=*/true)
           .Number("eps", &O::eps, "Added to the second moment's sqrt", 0.0)
           .Number("weight_decay", &O::weight_decay,
                   "Decoupled weight decay: each step multiplies the weight by 1 - lr * "
                   "weight_decay",
                   0.0);
  return *schema;
}

}  // namespace commir
