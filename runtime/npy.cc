#include "runtime/npy.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "commir/element_type.h"
#include "runtime/tensor.h"

namespace commir::runtime {
namespace {

// Tensor bytes are copied to and from the file verbatim, and .npy data is little-endian.
static_assert(std::endian::native == std::endian::little,
              "the .npy reader and writer assume a little-endian host");

constexpr std::string_view kMagic = "\x93NUMPY";
// Magic, two version bytes, then the header length: 2 bytes in 1.0, 4 bytes in 2.0/3.0.
constexpr size_t kPreambleV1 = kMagic.size() + 2 + 2;
constexpr size_t kPreambleV2 = kMagic.size() + 2 + 4;
// NumPy pads the header so that the data starts at a multiple of this.
constexpr size_t kHeaderAlignment = 64;

struct NpyDtype {
  std::string_view descr;
  ElementType type;
};

// The dtypes a .npy file may have; one per CommIR type except bf16, which NumPy lacks.
constexpr NpyDtype kNpyDtypes[] = {
    {"<f8", ElementType::kF64}, {"<f4", ElementType::kF32}, {"<f2", ElementType::kF16},
    {"<i8", ElementType::kI64}, {"<i4", ElementType::kI32}, {"|b1", ElementType::kI1},
};

std::optional<ElementType> ElementTypeOfDescr(std::string_view descr) {
  for (const NpyDtype& dtype : kNpyDtypes) {
    if (dtype.descr == descr) return dtype.type;
  }
  return std::nullopt;
}

// The dtype a tensor is written as: its own, except that f16 and bf16 widen to '<f4'.
std::string_view DescrToWrite(ElementType type) {
  switch (type) {
    case ElementType::kF64: return "<f8";
    case ElementType::kF32:
    case ElementType::kF16:
    case ElementType::kBF16: return "<f4";
    case ElementType::kI64: return "<i8";
    case ElementType::kI32: return "<i4";
    case ElementType::kI1: return "|b1";
  }
  return "<f4";  // Unreachable: the switch covers every ElementType.
}

// Python's repr of a shape tuple: "()", "(3,)", "(3, 4)".
std::string PythonShapeTuple(absl::Span<const int64_t> shape) {
  if (shape.size() == 1) return absl::StrFormat("(%d,)", shape[0]);
  return absl::StrFormat("(%s)", absl::StrJoin(shape, ", "));
}

// CommIR's spelling of a tensor type: "f32[4, 4]".
std::string CommirTypeString(ElementType type, absl::Span<const int64_t> shape) {
  return absl::StrFormat("%s[%s]", ElementTypeName(type), absl::StrJoin(shape, ", "));
}

// The parsed header dictionary.
struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

// Parses the header: a Python dict literal with exactly the keys 'descr' (a string),
// 'fortran_order' (True/False) and 'shape' (a tuple of non-negative ints), followed by
// padding. Only the literal forms NumPy writes (and hand-written equivalents: either
// quote style, optional trailing commas, any spacing) are accepted. Error messages
// are relative to the header and get the file name prepended by the caller.
class HeaderDictParser {
 public:
  explicit HeaderDictParser(std::string_view text) : text_(text) {}

  absl::StatusOr<NpyHeader> Parse() {
    NpyHeader header;
    bool seen_descr = false, seen_fortran_order = false, seen_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("the header does not start with '{'");
    SkipSpace();
    while (!Consume('}')) {
      absl::StatusOr<std::string> key = ParseString("a key");
      if (!key.ok()) return key.status();
      SkipSpace();
      if (!Consume(':')) return Error(absl::StrFormat("expected ':' after key '%s'", *key));
      SkipSpace();
      bool* seen = *key == "descr"           ? &seen_descr
                   : *key == "fortran_order" ? &seen_fortran_order
                   : *key == "shape"         ? &seen_shape
                                             : nullptr;
      if (seen == nullptr) {
        return Error(absl::StrFormat(
            "unexpected key '%s' (expected 'descr', 'fortran_order' and 'shape')", *key));
      }
      if (*seen) return Error(absl::StrFormat("duplicate key '%s'", *key));
      *seen = true;
      absl::Status value_status;
      if (*key == "descr") {
        value_status = ParseDescr(header.descr);
      } else if (*key == "fortran_order") {
        value_status = ParseBool(header.fortran_order);
      } else {
        value_status = ParseShape(header.shape);
      }
      if (!value_status.ok()) return value_status;
      SkipSpace();
      if (Consume(',')) {
        SkipSpace();
      } else if (Peek() != '}') {
        return Error("expected ',' or '}' after a value");
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the closing '}'");
    if (!seen_descr) return Error("missing key 'descr'");
    if (!seen_fortran_order) return Error("missing key 'fortran_order'");
    if (!seen_shape) return Error("missing key 'shape'");
    return header;
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool AtQuote() const { return Peek() == '\'' || Peek() == '"'; }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  bool ConsumeWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }
  // NumPy pads with spaces and ends with '\n'; Python also allows other whitespace.
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }

  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrFormat("bad header dict at header offset %d: %s", pos_, what));
  }

  // A quoted string without escapes (NumPy never writes escapes in these headers).
  absl::StatusOr<std::string> ParseString(std::string_view what) {
    if (!AtQuote()) return Error(absl::StrFormat("expected %s as a quoted string", what));
    const char quote = text_[pos_++];
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\') return Error("escape sequences in strings are not supported");
      ++pos_;
    }
    if (pos_ == text_.size()) return Error("unterminated string");
    std::string value(text_.substr(start, pos_ - start));
    ++pos_;
    return value;
  }

  absl::Status ParseDescr(std::string& descr) {
    if (!AtQuote()) return Error("'descr' is not a string (structured dtypes are not supported)");
    absl::StatusOr<std::string> value = ParseString("the 'descr' value");
    if (!value.ok()) return value.status();
    descr = *std::move(value);
    return absl::OkStatus();
  }

  absl::Status ParseBool(bool& value) {
    if (ConsumeWord("True")) {
      value = true;
    } else if (ConsumeWord("False")) {
      value = false;
    } else {
      return Error("'fortran_order' is not True or False");
    }
    return absl::OkStatus();
  }

  // "()", "(3,)", "(3, 4)", "(3, 4,)". "(3)" is an int in Python, not a tuple.
  absl::Status ParseShape(std::vector<int64_t>& shape) {
    if (!Consume('(')) return Error("'shape' is not a tuple");
    SkipSpace();
    bool trailing_comma = false;
    while (!Consume(')')) {
      const size_t start = pos_;
      while (std::isdigit(static_cast<unsigned char>(Peek()))) ++pos_;
      int64_t dim = 0;
      if (pos_ == start) return Error("expected a non-negative integer in 'shape'");
      // The digits were checked above, so the only possible failure is overflow.
      if (std::from_chars(text_.data() + start, text_.data() + pos_, dim).ec != std::errc()) {
        return Error("a 'shape' dimension does not fit in 64 bits");
      }
      shape.push_back(dim);
      SkipSpace();
      trailing_comma = Consume(',');
      SkipSpace();
      if (!trailing_comma && Peek() != ')') return Error("expected ',' or ')' in 'shape'");
    }
    if (shape.size() == 1 && !trailing_comma) {
      return Error("'shape' is not a tuple (a 1-d shape is written (n,))");
    }
    return absl::OkStatus();
  }

  std::string_view text_;
  size_t pos_ = 0;
};

uint32_t ReadLittleEndian(std::string_view bytes, size_t offset, size_t width) {
  uint32_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    value |= uint32_t{static_cast<unsigned char>(bytes[offset + i])} << (8 * i);
  }
  return value;
}

void AppendLittleEndian(std::string& out, uint32_t value, size_t width) {
  for (size_t i = 0; i < width; ++i) out.push_back(static_cast<char>(value >> (8 * i)));
}

// Elements in `shape`, or nullopt if the shape is too large. The product of the nonzero
// dimensions, times the element width, must fit in int64 even when some dimension is 0,
// so that the runtime can multiply dimensions in any order without overflow.
std::optional<int64_t> CheckedNumElements(absl::Span<const int64_t> shape, int64_t width) {
  int64_t nonzero_product = 1;
  bool has_zero = false;
  for (int64_t dim : shape) {
    if (dim == 0) {
      has_zero = true;
    } else if (nonzero_product > std::numeric_limits<int64_t>::max() / width / dim) {
      return std::nullopt;
    } else {
      nonzero_product *= dim;
    }
  }
  return has_zero ? 0 : nonzero_product;
}

// Where a .npy file's parts are, from its preamble and header.
struct NpyLayout {
  ElementType type;
  std::string descr;
  std::vector<int64_t> shape;
  size_t data_offset = 0;  // preamble + header
  size_t data_bytes = 0;   // what the shape and dtype promise
};

// NumPy itself refuses headers over 10000 bytes by default; this is far above that and
// keeps a bogus 4 GiB header length from being read.
constexpr size_t kMaxHeaderBytes = size_t{1} << 20;

// The preamble's length and the header's, from the first bytes of a .npy file (the
// header itself need not be there yet).
struct NpyPreamble {
  size_t preamble = 0;
  size_t header_size = 0;
};

absl::StatusOr<NpyPreamble> ParseNpyPreamble(std::string_view bytes,
                                             std::string_view name_for_errors) {
  // `what` is a std::string or an absl::string_view (a status message).
  auto malformed = [&](const auto& what) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", name_for_errors, what));
  };

  if (bytes.substr(0, kMagic.size()) != kMagic.substr(0, bytes.size())) {
    return malformed("not a .npy file (bad magic string)");
  }
  if (bytes.size() < kPreambleV1) {
    return malformed(
        absl::StrFormat("truncated header: the file is %d bytes, too short for the magic string, "
                        "version and header length",
                        bytes.size()));
  }
  const int major = static_cast<unsigned char>(bytes[kMagic.size()]);
  const int minor = static_cast<unsigned char>(bytes[kMagic.size() + 1]);
  if (major < 1 || major > 3 || minor != 0) {
    return malformed(absl::StrFormat(
        "unsupported .npy format version %d.%d (supported: 1.0, 2.0, 3.0)", major, minor));
  }
  // 3.0 differs from 2.0 only in declaring the header utf-8 rather than latin-1; every
  // header this reader accepts is ASCII, so the two need no separate handling.
  const size_t preamble = major == 1 ? kPreambleV1 : kPreambleV2;
  if (bytes.size() < preamble) {
    return malformed(absl::StrFormat(
        "truncated header: the file is %d bytes, too short for a version %d.0 preamble",
        bytes.size(), major));
  }
  const size_t header_size =
      ReadLittleEndian(bytes, kMagic.size() + 2, preamble - kMagic.size() - 2);
  if (header_size > kMaxHeaderBytes) {
    return malformed(absl::StrFormat("the header length %d is over the %d bytes this reader accepts",
                                     header_size, kMaxHeaderBytes));
  }
  return NpyPreamble{preamble, header_size};
}

// Parses the preamble and header of `bytes`, which must hold at least the header.
absl::StatusOr<NpyLayout> ParseNpyLayout(std::string_view bytes, std::string_view name_for_errors) {
  auto malformed = [&](const auto& what) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", name_for_errors, what));
  };
  absl::StatusOr<NpyPreamble> parsed_preamble = ParseNpyPreamble(bytes, name_for_errors);
  if (!parsed_preamble.ok()) return parsed_preamble.status();
  const size_t preamble = parsed_preamble->preamble;
  const size_t header_size = parsed_preamble->header_size;
  if (bytes.size() - preamble < header_size) {
    return malformed(
        absl::StrFormat("truncated header: the header length is %d bytes but only %d follow",
                        header_size, bytes.size() - preamble));
  }

  absl::StatusOr<NpyHeader> header = HeaderDictParser(bytes.substr(preamble, header_size)).Parse();
  if (!header.ok()) return malformed(header.status().message());

  if (header->descr.size() >= 2 && header->descr[0] == '>') {
    return malformed(
        absl::StrFormat("big-endian dtype '%s' is not supported; save a little-endian array, e.g. "
                        "with arr.astype(arr.dtype.newbyteorder('<'))",
                        header->descr));
  }
  const std::optional<ElementType> type = ElementTypeOfDescr(header->descr);
  if (!type) {
    return malformed(absl::StrFormat(
        "unsupported dtype '%s' (supported: '<f8', '<f4', '<f2', '<i8', '<i4', '|b1')",
        header->descr));
  }
  if (header->fortran_order) {
    return malformed(
        "Fortran-order arrays are not supported; save a C-order array, e.g. with "
        "np.ascontiguousarray(arr)");
  }

  const int64_t width = ElementTypeByteWidth(*type);
  const std::optional<int64_t> count = CheckedNumElements(header->shape, width);
  if (!count) {
    return malformed(absl::StrFormat("shape %s is too large", PythonShapeTuple(header->shape)));
  }
  return NpyLayout{*type, header->descr, std::move(header->shape), preamble + header_size,
                   static_cast<size_t>(*count * width)};
}

}  // namespace

absl::StatusOr<size_t> NpyHeaderEnd(std::string_view prefix, std::string_view name_for_errors) {
  absl::StatusOr<NpyPreamble> parsed = ParseNpyPreamble(prefix, name_for_errors);
  if (!parsed.ok()) return parsed.status();
  return parsed->preamble + parsed->header_size;
}

absl::StatusOr<size_t> NpyFileSize(std::string_view prefix, std::string_view name_for_errors) {
  absl::StatusOr<NpyLayout> layout = ParseNpyLayout(prefix, name_for_errors);
  if (!layout.ok()) return layout.status();
  return layout->data_offset + layout->data_bytes;
}

absl::StatusOr<Tensor> ParseNpy(std::string_view bytes, std::string_view name_for_errors) {
  auto malformed = [&](const auto& what) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s", name_for_errors, what));
  };
  absl::StatusOr<NpyLayout> layout = ParseNpyLayout(bytes, name_for_errors);
  if (!layout.ok()) return layout.status();
  const ElementType* type = &layout->type;
  NpyLayout* header = &*layout;
  const std::string_view data = bytes.substr(layout->data_offset);
  const size_t needed = layout->data_bytes;
  if (data.size() < needed) {
    return malformed(absl::StrFormat(
        "data size mismatch: shape %s of '%s' needs %d bytes but only %d follow the header",
        PythonShapeTuple(header->shape), header->descr, needed, data.size()));
  }
  if (data.size() > needed) {
    return malformed(absl::StrFormat(
        "trailing garbage: %d bytes follow the %d bytes of data for shape %s of '%s'",
        data.size() - needed, needed, PythonShapeTuple(header->shape), header->descr));
  }

  Tensor tensor(*type, std::move(header->shape));
  if (needed > 0) std::memcpy(tensor.raw_data(), data.data(), needed);
  if (*type == ElementType::kI1) {
    // NumPy reads any nonzero byte as True; i1 tensors hold exactly 0 or 1.
    uint8_t* values = tensor.data<uint8_t>();
    for (int64_t i = 0; i < tensor.num_elements(); ++i) values[i] = values[i] != 0;
  }
  return tensor;
}

std::string SerializeNpy(const Tensor& tensor) {
  std::string dict =
      absl::StrFormat("{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                      DescrToWrite(tensor.element_type()), PythonShapeTuple(tensor.shape()));
  // Version 1.0 stores the header length in 16 bits; only absurd ranks need 2.0.
  const bool fits_v1 = dict.size() + kHeaderAlignment <= std::numeric_limits<uint16_t>::max();
  const size_t preamble = fits_v1 ? kPreambleV1 : kPreambleV2;
  // Pad with spaces so that the data starts 64-byte aligned, then end with '\n'.
  const size_t unpadded = preamble + dict.size() + 1;
  dict.append((kHeaderAlignment - unpadded % kHeaderAlignment) % kHeaderAlignment, ' ');
  dict.push_back('\n');

  std::string out(kMagic);
  out.push_back(static_cast<char>(fits_v1 ? 1 : 2));
  out.push_back(0);
  AppendLittleEndian(out, static_cast<uint32_t>(dict.size()), preamble - kMagic.size() - 2);
  out += dict;
  if (tensor.element_type() == ElementType::kF16 || tensor.element_type() == ElementType::kBF16) {
    const std::vector<float> widened = tensor.ToFloat();
    out.append(reinterpret_cast<const char*>(widened.data()), widened.size() * sizeof(float));
  } else {
    out.append(static_cast<const char*>(tensor.raw_data()),
               static_cast<size_t>(tensor.byte_size()));
  }
  return out;
}

namespace {

// Reads up to `count` more bytes of `file` onto `bytes`; fewer only at end of file.
absl::Status ReadMore(std::FILE* file, size_t count, std::string& bytes, const std::string& path) {
  char buffer[1 << 16];
  while (count > 0) {
    const size_t got = std::fread(buffer, 1, std::min(count, sizeof(buffer)), file);
    bytes.append(buffer, got);
    count -= got;
    if (got == 0) break;
  }
  if (std::ferror(file)) {
    const int error = errno;
    if (error == EISDIR) return absl::InvalidArgumentError(absl::StrFormat("%s: is a directory", path));
    return absl::ErrnoToStatus(error, absl::StrFormat("cannot read %s", path));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> ReadNpy(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return absl::ErrnoToStatus(errno, absl::StrFormat("cannot open %s", path));
  absl::Cleanup closer = [file] { std::fclose(file); };

  // Read in the order the format is checked, so that a file that is not .npy (or a
  // device that never ends, such as /dev/zero) fails on its first bytes, and read
  // exactly the bytes the header promises plus one to detect trailing data. ParseNpy
  // then checks the whole with its usual messages.
  std::string bytes;
  if (absl::Status s = ReadMore(file, kPreambleV2, bytes, path); !s.ok()) return s;
  // A bad magic string or version fails here; otherwise learn the header's length.
  if (absl::StatusOr<size_t> header_end = NpyHeaderEnd(bytes, path); !header_end.ok()) {
    return header_end.status();
  } else if (*header_end > bytes.size()) {
    if (absl::Status s = ReadMore(file, *header_end - bytes.size(), bytes, path); !s.ok()) return s;
  }
  absl::StatusOr<size_t> total = NpyFileSize(bytes, path);
  if (!total.ok()) return total.status();
  if (*total > bytes.size()) {
    if (absl::Status s = ReadMore(file, *total - bytes.size(), bytes, path); !s.ok()) return s;
  }
  if (bytes.size() == *total) {
    // One byte more than promised is enough to report trailing data.
    if (absl::Status s = ReadMore(file, 1, bytes, path); !s.ok()) return s;
  }
  if (bytes.size() > *total) {
    // How much follows is not counted: the file may never end.
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: trailing garbage: the file goes on past the %d bytes its header promises", path,
        *total));
  }
  return ParseNpy(bytes, path);
}

absl::Status WriteNpy(const std::string& path, const Tensor& tensor) {
  const std::string bytes = SerializeNpy(tensor);
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrFormat("cannot open %s for writing", path));
  }
  const bool written = std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  // fclose flushes, so it can fail too (e.g. a full disk).
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    return absl::ErrnoToStatus(errno, absl::StrFormat("cannot write %s", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> ConvertLoadedToArgumentType(const Tensor& loaded, ElementType want,
                                                   absl::Span<const int64_t> want_shape,
                                                   std::string_view arg_name) {
  if (absl::MakeConstSpan(loaded.shape()) != want_shape) {
    return absl::InvalidArgumentError(
        absl::StrFormat("input %s: .npy has shape %s but the argument is %s", arg_name,
                        PythonShapeTuple(loaded.shape()), CommirTypeString(want, want_shape)));
  }
  if (loaded.element_type() == want) return loaded;
  const bool is_16_bit_float = want == ElementType::kF16 || want == ElementType::kBF16;
  if (loaded.element_type() == ElementType::kF32 && is_16_bit_float) {
    return Tensor::FromFloat(
        want, loaded.shape(),
        absl::MakeConstSpan(loaded.data<float>(), static_cast<size_t>(loaded.num_elements())));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "input %s: .npy has element type %s but the argument is %s%s", arg_name,
      ElementTypeName(loaded.element_type()), CommirTypeString(want, want_shape),
      is_16_bit_float ? " (f16 and bf16 arguments take float32 .npy files; f16 also float16)"
                      : ""));
}

}  // namespace commir::runtime
