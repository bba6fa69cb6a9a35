// Device meshes (docs/language.md, "Modules and meshes"): named axes, devices numbered row-major with the last
// axis fastest, and the device groups that collectives over an axis or axis group use.
#ifndef COMMIR_COMMIR_MESH_H_
#define COMMIR_COMMIR_MESH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "commir/location.h"

namespace commir {

struct MeshAxis {
  std::string name;
  int64_t size = 1;
  Location loc;
};

class Mesh {
 public:
  Mesh(std::string name, std::vector<MeshAxis> axes, Location loc = {});

  const std::string& name() const { return name_; }
  const std::vector<MeshAxis>& axes() const { return axes_; }
  Location loc() const { return loc_; }
  // Product of the axis sizes (saturated at the largest int64 for an invalid mesh).
  int64_t num_devices() const;
  // Every axis size >= 1, axis names unique and the device count fits in an int64: what
  // the verifier requires. Code that divides by group sizes may rely on it.
  bool IsWellFormed() const;

  std::optional<int> AxisIndex(absl::string_view axis) const;
  // Product of the sizes of `axes` (unknown axes count as 1; saturated on overflow).
  int64_t GroupSize(absl::Span<const std::string> axes) const;

  std::vector<int64_t> Coordinates(int64_t device) const;
  int64_t DeviceId(absl::Span<const int64_t> coordinates) const;

  // The group of `device` over `axes`: the devices that share all other coordinates,
  // ordered by linearized coordinate over `axes` (the first listed axis major).
  std::vector<int64_t> GroupMembers(int64_t device, absl::Span<const std::string> axes) const;
  // `device`'s position within that group.
  int64_t GroupCoordinate(int64_t device, absl::Span<const std::string> axes) const;

 private:
  std::string name_;
  std::vector<MeshAxis> axes_;
  Location loc_;
};

}  // namespace commir

#endif  // COMMIR_COMMIR_MESH_H_
