// The schema of a pass's typed options struct, declared once beside the pass:
//
//   struct RingAttentionOptions {
//     bool zigzag = false;
//     std::string axes;
//     static const OptionSchema<RingAttentionOptions>& Schema();
//   };
//
//   const OptionSchema<RingAttentionOptions>& RingAttentionOptions::Schema() {
//     static const auto* schema = &(*new OptionSchema<RingAttentionOptions>())
//         .Bool("zigzag", &RingAttentionOptions::zigzag, "help ...")
//         .String("axes", &RingAttentionOptions::axes, "help ...");
//     return *schema;
//   }
//
// Each row names a field, its pipeline spelling, help and range; the default is the
// field's initializer. The registry row (MakePassInfo), the pipeline parser's checks and
// errors, `commir-opt --list-passes` and the text form of a typed pipeline all read it.
#ifndef COMMIR_TRANSFORMS_OPTION_SCHEMA_H_
#define COMMIR_TRANSFORMS_OPTION_SCHEMA_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "commir/check.h"
#include "transforms/pass.h"

namespace commir {

template <typename O>
class OptionSchema {
 public:
  // An integer field (any integral type), optionally bounded (inclusive).
  template <typename I>
  OptionSchema& Int(std::string name, I O::*field, std::string help,
                    std::optional<int64_t> min_value = std::nullopt,
                    std::optional<int64_t> max_value = std::nullopt) {
    static_assert(std::is_integral_v<I> && !std::is_same_v<I, bool>);
    PassOptionSpec spec{std::move(name), PassOptionType::kInt, "", std::move(help), {},
                        min_value, max_value};
    return Add(std::move(spec),
               [field](O& o, const PassOptions::Value& v) {
                 o.*field = static_cast<I>(std::get<int64_t>(v));
               },
               [field](const O& o) { return PassOptions::Value(static_cast<int64_t>(o.*field)); });
  }

  OptionSchema& Bool(std::string name, bool O::*field, std::string help) {
    PassOptionSpec spec{std::move(name), PassOptionType::kBool, "", std::move(help)};
    return Add(std::move(spec),
               [field](O& o, const PassOptions::Value& v) { o.*field = std::get<bool>(v); },
               [field](const O& o) { return PassOptions::Value(o.*field); });
  }

  OptionSchema& String(std::string name, std::string O::*field, std::string help) {
    PassOptionSpec spec{std::move(name), PassOptionType::kString, "", std::move(help)};
    return Add(std::move(spec),
               [field](O& o, const PassOptions::Value& v) { o.*field = std::get<std::string>(v); },
               [field](const O& o) { return PassOptions::Value(o.*field); });
  }

  // A double field, finite, optionally bounded: at least `min_value`, at most `max_value`
  // (below it when `max_exclusive`).
  OptionSchema& Number(std::string name, double O::*field, std::string help,
                       std::optional<double> min_value = std::nullopt,
                       std::optional<double> max_value = std::nullopt,
                       bool max_exclusive = false) {
    PassOptionSpec spec{std::move(name), PassOptionType::kNumber, "", std::move(help)};
    spec.min_number = min_value;
    spec.max_number = max_value;
    spec.max_exclusive = max_exclusive;
    return Add(std::move(spec),
               [field](O& o, const PassOptions::Value& v) { o.*field = std::get<double>(v); },
               [field](const O& o) { return PassOptions::Value(o.*field); });
  }

  // A choice field, `std::variant<A...>`: one of the alternatives A, each a typed options
  // struct with `static constexpr char kName[]` (its spelling) and `Schema()` (its own
  // options), written `name` or `name{option=value,...}`. The default is the field's
  // initializer (for a variant, its first alternative with its defaults).
  template <typename... A>
  OptionSchema& Choice(std::string name, std::variant<A...> O::*field, std::string help) {
    PassOptionSpec spec{std::move(name), PassOptionType::kChoice, "", std::move(help)};
    spec.choices = {PassOptionChoice{A::kName, A::Schema().Specs()}...};
    const PassOptionSpec& row = spec;
    auto set = [field, row](O& o, const PassOptions::Value& v) {
      absl::StatusOr<ChoiceValue> choice = ParseChoiceValue(row, std::get<std::string>(v));
      COMMIR_CHECK(choice.ok(), "a choice option holds a value its schema does not accept");
      ((choice->name == A::kName ? (void)(o.*field = A::Schema().FromValues(choice->values))
                                 : (void)0),
       ...);
    };
    auto get = [field](const O& o) {
      return PassOptions::Value(std::visit(
          [](const auto& alternative) {
            using Alternative = std::decay_t<decltype(alternative)>;
            return FormatChoiceValue(
                PassOptionChoice{Alternative::kName, Alternative::Schema().Specs()},
                Alternative::Schema().ToValues(alternative));
          },
          o.*field));
    };
    return Add(std::move(spec), std::move(set), std::move(get));
  }

  // An enum field and its spellings, in the order --list-passes shows them.
  template <typename E>
  OptionSchema& Enum(std::string name, E O::*field,
                     std::vector<std::pair<std::string, E>> spellings, std::string help) {
    PassOptionSpec spec{std::move(name), PassOptionType::kEnum, "", std::move(help)};
    for (const auto& [spelling, value] : spellings) spec.enum_values.push_back(spelling);
    auto shared = std::make_shared<const std::vector<std::pair<std::string, E>>>(
        std::move(spellings));
    return Add(
        std::move(spec),
        [field, shared](O& o, const PassOptions::Value& v) {
          for (const auto& [spelling, value] : *shared) {
            if (spelling == std::get<std::string>(v)) o.*field = value;
          }
        },
        [field, shared](const O& o) {
          for (const auto& [spelling, value] : *shared) {
            if (value == o.*field) return PassOptions::Value(spelling);
          }
          COMMIR_CHECK(false, "an enum option holds a value its schema does not spell");
          return PassOptions::Value(std::string());
        });
  }

  // The rows as the registry, the parser and --list-passes see them; each default is the
  // field's value in O{}.
  const std::vector<PassOptionSpec>& Specs() const { return specs_; }

  // O{} with every value of `values` set (the parser has checked their types and ranges).
  O FromValues(const PassOptions& values) const {
    O options{};
    for (size_t i = 0; i < specs_.size(); ++i) {
      if (const PassOptions::Value* v = values.Find(specs_[i].name)) fields_[i].set(options, *v);
    }
    return options;
  }

  // Every field of `options` by option name.
  PassOptions ToValues(const O& options) const {
    PassOptions values;
    for (size_t i = 0; i < specs_.size(); ++i) {
      values.Set(specs_[i].name, fields_[i].get(options));
    }
    return values;
  }

 private:
  struct Field {
    std::function<void(O&, const PassOptions::Value&)> set;
    std::function<PassOptions::Value(const O&)> get;
  };

  OptionSchema& Add(PassOptionSpec spec, std::function<void(O&, const PassOptions::Value&)> set,
                    std::function<PassOptions::Value(const O&)> get) {
    for (const PassOptionSpec& other : specs_) {
      COMMIR_CHECK(other.name != spec.name, "two options of a pass share a name");
    }
    const PassOptions::Value default_value = get(O{});
    // The default is shown and parsed as text, so it must be a value the schema accepts.
    COMMIR_CHECK(CheckOptionValue(spec, default_value).ok(),
                 "a pass option's default is outside its own range");
    spec.default_value = std::holds_alternative<std::string>(default_value)
                             ? std::get<std::string>(default_value)
                             : FormatOptionValue(default_value);
    specs_.push_back(std::move(spec));
    fields_.push_back({std::move(set), std::move(get)});
    return *this;
  }

  std::vector<PassOptionSpec> specs_;
  std::vector<Field> fields_;
};

namespace internal {
template <typename P, typename = void>
struct HasOptions : std::false_type {};
template <typename P>
struct HasOptions<P, std::void_t<typename P::Options>> : std::true_type {};
}  // namespace internal

// The registry row of pass P: its name, description, the option rows of its schema, and
// a factory that builds P from parsed values. P is an OptionsPass (constructed from
// P::Options) or a pass without options (constructed as P()).
template <typename P>
PassInfo MakePassInfo(std::string name, std::string description) {
  PassInfo info;
  info.name = std::move(name);
  info.description = std::move(description);
  if constexpr (internal::HasOptions<P>::value) {
    info.options = P::Options::Schema().Specs();
    info.create = [](const PassInfo&, const PassOptions& values) -> std::unique_ptr<Pass> {
      return std::make_unique<P>(P::Options::Schema().FromValues(values));
    };
  } else {
    info.create = [](const PassInfo&, const PassOptions&) -> std::unique_ptr<Pass> {
      return std::make_unique<P>();
    };
  }
  return info;
}

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_OPTION_SCHEMA_H_
