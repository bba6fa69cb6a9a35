#include "commir/attribute.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace commir {

Attribute Attribute::IntList(const std::vector<int64_t>& values) {
  std::vector<Attribute> items;
  items.reserve(values.size());
  for (int64_t v : values) items.push_back(Int(v));
  return List(std::move(items));
}

Attribute Attribute::Axes(AxisList axes) {
  if (axes.size() == 1) return Ident(std::move(axes[0]));
  std::vector<Attribute> items;
  for (std::string& axis : axes) items.push_back(Ident(std::move(axis)));
  return Attribute(Kind::kAxes, std::move(items));
}

double Attribute::number_value() const {
  return kind_ == Kind::kInt ? static_cast<double>(int_value()) : float_value();
}

AxisList Attribute::axes() const {
  if (kind_ == Kind::kIdent) return {string_value()};
  AxisList axes;
  if (kind_ == Kind::kAxes) {
    for (const Attribute& item : list()) axes.push_back(item.string_value());
  }
  return axes;
}

std::optional<std::vector<int64_t>> Attribute::int_list() const {
  if (kind_ != Kind::kList) return std::nullopt;
  std::vector<int64_t> values;
  for (const Attribute& item : list()) {
    if (!item.is_int()) return std::nullopt;
    values.push_back(item.int_value());
  }
  return values;
}

std::string FormatFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  std::string text(buffer, end);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

namespace {

std::string QuoteString(const std::string& value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out.push_back('\\');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

}  // namespace

std::string Attribute::ToString() const {
  switch (kind_) {
    case Kind::kInt: return absl::StrCat(int_value());
    case Kind::kFloat: return FormatFloat(float_value());
    case Kind::kBool: return bool_value() ? "true" : "false";
    case Kind::kString: return QuoteString(string_value());
    case Kind::kIdent: return string_value();
    case Kind::kList:
      return absl::StrCat("[", absl::StrJoin(list(), ", ", [](std::string* out, const Attribute& a) {
                            out->append(a.ToString());
                          }), "]");
    case Kind::kAxes: return FormatAxes(axes());
  }
  return "";
}

const Attribute* AttrDict::Find(absl::string_view key) const {
  for (const Entry& entry : entries_) {
    if (entry.first == key) return &entry.second;
  }
  return nullptr;
}

void AttrDict::Set(std::string key, Attribute value) {
  for (Entry& entry : entries_) {
    if (entry.first == key) {
      entry.second = std::move(value);
      return;
    }
  }
  entries_.emplace_back(std::move(key), std::move(value));
}

bool AttrDict::Erase(absl::string_view key) {
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [&](const Entry& e) { return e.first == key; });
  if (it == entries_.end()) return false;
  entries_.erase(it);
  return true;
}

int64_t AttrDict::GetInt(absl::string_view key, int64_t default_value) const {
  const Attribute* a = Find(key);
  return a != nullptr && a->is_int() ? a->int_value() : default_value;
}

double AttrDict::GetNumber(absl::string_view key, double default_value) const {
  const Attribute* a = Find(key);
  return a != nullptr && a->is_number() ? a->number_value() : default_value;
}

bool AttrDict::GetBool(absl::string_view key, bool default_value) const {
  const Attribute* a = Find(key);
  return a != nullptr && a->kind() == Attribute::Kind::kBool ? a->bool_value() : default_value;
}

std::string AttrDict::GetIdent(absl::string_view key, absl::string_view default_value) const {
  const Attribute* a = Find(key);
  if (a != nullptr && a->kind() == Attribute::Kind::kIdent) return a->string_value();
  return std::string(default_value);
}

bool operator==(const AttrDict& a, const AttrDict& b) {
  if (a.entries_.size() != b.entries_.size()) return false;
  // Order-insensitive: the same attributes written in another order are equal.
  for (const AttrDict::Entry& entry : a.entries_) {
    const Attribute* other = b.Find(entry.first);
    if (other == nullptr || !(*other == entry.second)) return false;
  }
  return true;
}

}  // namespace commir
