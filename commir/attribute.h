// Attribute values (docs/language.md, "General form" of ops): integers, floats, booleans, strings, bare
// identifiers, lists and axis groups; and the ordered dictionary an op carries.
#ifndef COMMIR_COMMIR_ATTRIBUTE_H_
#define COMMIR_COMMIR_ATTRIBUTE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include "absl/strings/string_view.h"
#include <utility>
#include <variant>
#include <vector>

#include "commir/type.h"

namespace commir {

class Attribute {
 public:
  enum class Kind { kInt, kFloat, kBool, kString, kIdent, kList, kAxes };

  static Attribute Int(int64_t value) { return Attribute(Kind::kInt, value); }
  static Attribute Float(double value) { return Attribute(Kind::kFloat, value); }
  static Attribute Bool(bool value) { return Attribute(Kind::kBool, value); }
  static Attribute String(std::string value) { return Attribute(Kind::kString, std::move(value)); }
  static Attribute Ident(std::string value) { return Attribute(Kind::kIdent, std::move(value)); }
  static Attribute List(std::vector<Attribute> items) { return Attribute(Kind::kList, std::move(items)); }
  static Attribute IntList(const std::vector<int64_t>& values);
  // `(dp, tp)`; a single axis is stored as an identifier, as it is written.
  static Attribute Axes(AxisList axes);

  Kind kind() const { return kind_; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }

  int64_t int_value() const { return std::get<int64_t>(value_); }
  double float_value() const { return std::get<double>(value_); }
  // Int or float as a double.
  double number_value() const;
  bool bool_value() const { return std::get<bool>(value_); }
  // String contents or identifier spelling.
  const std::string& string_value() const { return std::get<std::string>(value_); }
  const std::vector<Attribute>& list() const { return std::get<std::vector<Attribute>>(value_); }
  // The axes named by an identifier or an axis group.
  AxisList axes() const;
  // The list's items as integers, or nullopt if it is not a list of integers.
  std::optional<std::vector<int64_t>> int_list() const;

  // Canonical text (floats always carry '.', 'e', inf or nan so they re-parse as floats).
  std::string ToString() const;

  friend bool operator==(const Attribute& a, const Attribute& b) {
    return a.kind_ == b.kind_ && a.value_ == b.value_;
  }
  template <typename H>
  friend H AbslHashValue(H h, const Attribute& a) {
    h = H::combine(std::move(h), a.kind_);
    switch (a.kind_) {
      case Kind::kInt: return H::combine(std::move(h), a.int_value());
      case Kind::kFloat: return H::combine(std::move(h), a.float_value());
      case Kind::kBool: return H::combine(std::move(h), a.bool_value());
      case Kind::kString:
      case Kind::kIdent: return H::combine(std::move(h), a.string_value());
      case Kind::kList:
      case Kind::kAxes: return H::combine(std::move(h), a.list());
    }
    return h;
  }

 private:
  using Storage = std::variant<int64_t, double, bool, std::string, std::vector<Attribute>>;
  // Builds the variant in place: moving a temporary variant holding a vector of
  // Attribute trips GCC 12's -Wmaybe-uninitialized at -O1 (ASan builds).
  template <typename T>
  Attribute(Kind kind, T&& value)
      : kind_(kind), value_(std::in_place_type<std::decay_t<T>>, std::forward<T>(value)) {}
  Kind kind_;
  Storage value_;
};

// Formats a double so that it parses back to the same value and reads as a float.
std::string FormatFloat(double value);

// An op's attributes, in insertion order (the printer orders them canonically).
class AttrDict {
 public:
  using Entry = std::pair<std::string, Attribute>;

  const Attribute* Find(absl::string_view key) const;
  bool Has(absl::string_view key) const { return Find(key) != nullptr; }
  // Inserts or replaces.
  void Set(std::string key, Attribute value);
  bool Erase(absl::string_view key);

  int64_t GetInt(absl::string_view key, int64_t default_value) const;
  double GetNumber(absl::string_view key, double default_value) const;
  bool GetBool(absl::string_view key, bool default_value) const;
  std::string GetIdent(absl::string_view key, absl::string_view default_value) const;

  const std::vector<Entry>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  size_t size() const { return entries_.size(); }

  friend bool operator==(const AttrDict& a, const AttrDict& b);
  template <typename H>
  friend H AbslHashValue(H h, const AttrDict& d) {
    // Unordered, to agree with operator== (attribute order carries no meaning).
    return H::combine_unordered(std::move(h), d.entries_.begin(), d.entries_.end());
  }

 private:
  std::vector<Entry> entries_;
};

}  // namespace commir

#endif  // COMMIR_COMMIR_ATTRIBUTE_H_
