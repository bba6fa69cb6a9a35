#include "runtime/npy.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "commir/element_type.h"
#include "gtest/gtest.h"
#include "runtime/tensor.h"

namespace commir::runtime {
namespace {

constexpr std::string_view kF32Header34 =
    "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }";

// A .npy file built by hand: magic, version major.0, header length (2 bytes for 1.0,
// 4 bytes otherwise), the header text exactly as given, then `data`.
std::string NpyBytes(int major, std::string_view header, std::string_view data) {
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  const uint32_t size = static_cast<uint32_t>(header.size());
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) out.push_back(static_cast<char>(size >> (8 * i)));
  out.append(header);
  out.append(data);
  return out;
}

template <typename T>
std::string RawBytes(std::initializer_list<T> values) {
  std::string out(values.size() * sizeof(T), '\0');
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

std::string Floats(int count) {
  std::vector<float> values(count);
  for (int i = 0; i < count; ++i) values[i] = 0.5f * static_cast<float>(i) - 1.0f;
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
}

// A tensor of `type` with distinct, exactly representable values (0/1 for i1).
Tensor Sample(ElementType type, std::vector<int64_t> shape) {
  Tensor tensor(type, std::move(shape));
  for (int64_t i = 0; i < tensor.num_elements(); ++i) {
    const double n = static_cast<double>(i);
    if (type == ElementType::kI1) {
      tensor.SetFromDouble(i, i % 2);
    } else if (IsFloatType(type)) {
      tensor.SetFromDouble(i, n * 0.25 - 3.0);
    } else {
      tensor.SetFromDouble(i, i % 2 ? -n : n);
    }
  }
  return tensor;
}

// The status of `result` is an InvalidArgument error whose message holds every one of
// `parts`.
::testing::AssertionResult FailsWith(const absl::StatusOr<Tensor>& result,
                                     std::initializer_list<std::string_view> parts) {
  if (result.ok()) return ::testing::AssertionFailure() << "unexpectedly succeeded";
  if (result.status().code() != absl::StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << "wrong code: " << result.status();
  }
  const std::string message(result.status().message());
  for (std::string_view part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure() << "'" << message << "' lacks '" << part << "'";
    }
  }
  return ::testing::AssertionSuccess();
}

absl::StatusOr<Tensor> Parse(const std::string& bytes) { return ParseNpy(bytes, "in.npy"); }

TEST(NpyTest, RoundTripsEveryDirectlyStoredTypeAndShape) {
  const std::vector<std::vector<int64_t>> shapes = {{},     {0},       {1},         {5},
                                                    {2, 3}, {2, 0, 3}, {2, 1, 3, 2}};
  for (ElementType type : {ElementType::kF64, ElementType::kF32, ElementType::kI64,
                           ElementType::kI32, ElementType::kI1}) {
    for (const std::vector<int64_t>& shape : shapes) {
      const Tensor original = Sample(type, shape);
      absl::StatusOr<Tensor> back = Parse(SerializeNpy(original));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(back->BitwiseEqual(original)) << original.DebugTypeString();
    }
  }
}

TEST(NpyTest, SixteenBitFloatsAreWrittenAsFloat32AndConvertBackExactly) {
  for (ElementType type : {ElementType::kF16, ElementType::kBF16}) {
    for (const std::vector<int64_t>& shape :
         std::vector<std::vector<int64_t>>{{}, {0, 2}, {3, 4}}) {
      const Tensor original = Sample(type, shape);
      const std::string bytes = SerializeNpy(original);
      EXPECT_TRUE(absl::StrContains(bytes, "'descr': '<f4'"));
      absl::StatusOr<Tensor> loaded = Parse(bytes);
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      EXPECT_EQ(loaded->element_type(), ElementType::kF32);
      EXPECT_EQ(loaded->ToDouble(), original.ToDouble());
      absl::StatusOr<Tensor> back = ConvertLoadedToArgumentType(*loaded, type, shape, "%x");
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_TRUE(back->BitwiseEqual(original));
    }
  }
}

TEST(NpyTest, WritesNumpysVersion1HeaderPaddedTo64Bytes) {
  const std::string bytes = SerializeNpy(Tensor(ElementType::kF32, {3, 4}));
  ASSERT_EQ(bytes.size(), 128u + 48u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8, 118);
  const std::string header = bytes.substr(10, 118);
  EXPECT_EQ(header,
            std::string(kF32Header34) + std::string(118 - kF32Header34.size() - 1, ' ') + "\n");
}

TEST(NpyTest, WritesPythonTupleShapes) {
  EXPECT_TRUE(absl::StrContains(SerializeNpy(Tensor(ElementType::kI32, {})), "'shape': (), }"));
  EXPECT_TRUE(absl::StrContains(SerializeNpy(Tensor(ElementType::kI1, {7})),
                                "'descr': '|b1', 'fortran_order': False, 'shape': (7,), }"));
  EXPECT_TRUE(absl::StrContains(SerializeNpy(Tensor(ElementType::kF64, {2, 0})),
                                "'descr': '<f8', 'fortran_order': False, 'shape': (2, 0), }"));
  EXPECT_TRUE(absl::StrContains(SerializeNpy(Tensor(ElementType::kI64, {1})), "'descr': '<i8'"));
}

TEST(NpyTest, DataStartsAligned) {
  for (int rank = 0; rank < 40; ++rank) {
    const std::string bytes =
        SerializeNpy(Tensor(ElementType::kF32, std::vector<int64_t>(rank, 1)));
    EXPECT_EQ((bytes.size() - 4) % 64, 0u) << rank;
    EXPECT_EQ(bytes[bytes.size() - 5], '\n') << rank;
  }
}

TEST(NpyTest, ReadsVersion2And3Headers) {
  for (int major : {2, 3}) {
    absl::StatusOr<Tensor> tensor =
        Parse(NpyBytes(major, std::string(kF32Header34) + "\n", Floats(12)));
    ASSERT_TRUE(tensor.ok()) << tensor.status();
    EXPECT_EQ(tensor->DebugTypeString(), "f32[3, 4]");
    EXPECT_EQ(tensor->GetAsDouble(11), 4.5);
  }
}

TEST(NpyTest, ReadsLooselyWrittenHeaders) {
  for (std::string_view header : {
           "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3, 4)}",
           "{'shape':(3,4,),'fortran_order':False,'descr':'<f4'}\n",
           "  { 'descr' : '<f4' ,\n 'fortran_order' : False , 'shape' : ( 3 , 4 ) , }  \n",
       }) {
    absl::StatusOr<Tensor> tensor = Parse(NpyBytes(1, header, Floats(12)));
    ASSERT_TRUE(tensor.ok()) << header << ": " << tensor.status();
    EXPECT_EQ(tensor->DebugTypeString(), "f32[3, 4]");
  }
}

TEST(NpyTest, ReadsFloat16AndNormalisesBools) {
  absl::StatusOr<Tensor> half =
      Parse(NpyBytes(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }\n",
                     RawBytes<uint16_t>({0x3c00, 0xc000, 0x3555})));
  ASSERT_TRUE(half.ok()) << half.status();
  EXPECT_EQ(half->element_type(), ElementType::kF16);
  EXPECT_EQ(half->data<uint16_t>()[2], 0x3555);
  EXPECT_EQ(half->GetAsDouble(0), 1.0);
  EXPECT_EQ(half->GetAsDouble(1), -2.0);

  absl::StatusOr<Tensor> bools =
      Parse(NpyBytes(1, "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 2), }\n",
                     RawBytes<uint8_t>({0, 1, 7, 0})));
  ASSERT_TRUE(bools.ok()) << bools.status();
  EXPECT_EQ(bools->element_type(), ElementType::kI1);
  EXPECT_EQ(std::vector<uint8_t>(bools->data<uint8_t>(), bools->data<uint8_t>() + 4),
            (std::vector<uint8_t>{0, 1, 1, 0}));

  absl::StatusOr<Tensor> ints = Parse(NpyBytes(
      1, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }\n", RawBytes<int64_t>({-5})));
  ASSERT_TRUE(ints.ok()) << ints.status();
  EXPECT_EQ(ints->DebugTypeString(), "i64[]");
  EXPECT_EQ(ints->data<int64_t>()[0], -5);
}

TEST(NpyTest, RejectsBadMagicAndTruncatedPreambles) {
  EXPECT_TRUE(FailsWith(Parse("PK\x03\x04 not numpy at all"), {"in.npy: ", "bad magic"}));
  EXPECT_TRUE(FailsWith(Parse(std::string("\x93NUMPZ\x01\x00\x10\x00", 10)), {"bad magic"}));
  EXPECT_TRUE(FailsWith(Parse(""), {"in.npy: truncated header"}));
  EXPECT_TRUE(FailsWith(Parse(std::string("\x93NUMPY\x01\x00\x10", 9)), {"truncated header"}));
  EXPECT_TRUE(FailsWith(Parse(std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11)),
                        {"truncated header", "version 2.0"}));
}

TEST(NpyTest, RejectsUnsupportedVersions) {
  std::string bytes = NpyBytes(1, kF32Header34, Floats(12));
  bytes[6] = 4;
  EXPECT_TRUE(FailsWith(Parse(bytes), {"unsupported .npy format version 4.0"}));
  bytes[6] = 1;
  bytes[7] = 1;
  EXPECT_TRUE(FailsWith(Parse(bytes), {"version 1.1"}));
}

TEST(NpyTest, RejectsHeaderLongerThanFile) {
  std::string bytes = NpyBytes(1, kF32Header34, "");
  bytes.resize(40);
  EXPECT_TRUE(FailsWith(Parse(bytes),
                        {"truncated header", "header length is 59 bytes but only 30 follow"}));
}

TEST(NpyTest, RejectsMalformedDicts) {
  struct Case {
    std::string_view header;
    std::string_view error;
  };
  for (const Case& c : std::vector<Case>{
           {"'descr': '<f4'", "does not start with '{'"},
           {"{'descr' '<f4', 'fortran_order': False, 'shape': (3, 4)}",
            "expected ':' after key 'descr'"},
           {"{'descr': '<f4' 'fortran_order': False, 'shape': (3, 4)}", "expected ',' or '}'"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4),", "expected a key"},
           {"{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
           {"{'fortran_order': False, 'shape': (3, 4)}", "missing key 'descr'"},
           {"{'descr': '<f4', 'shape': (3, 4)}", "missing key 'fortran_order'"},
           {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)}",
            "duplicate key 'descr'"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), 'x': 1}",
            "unexpected key 'x'"},
           {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3,)}",
            "structured dtypes"},
           {"{'descr': '<f4, 'fortran_order': False, 'shape': (3, 4)}", "expected ',' or '}'"},
           {"{'descr': '<f4", "unterminated string"},
           {"{'descr': '<\\f4', 'fortran_order': False, 'shape': (3, 4)}", "escape sequences"},
           {"{'descr': '<f4', 'fortran_order': 0, 'shape': (3, 4)}", "not True or False"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': [3, 4]}", "'shape' is not a tuple"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (12)}",
            "a 1-d shape is written (n,)"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (-3, 4)}", "non-negative integer"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (3 4)}", "expected ',' or ')'"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}",
            "does not fit in 64 bits"},
           {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4)} x", "after the closing '}'"},
       }) {
    EXPECT_TRUE(
        FailsWith(Parse(NpyBytes(1, c.header, Floats(12))), {"in.npy: bad header dict", c.error}))
        << c.header;
  }
}

TEST(NpyTest, RejectsUnsupportedDtypesAndLayouts) {
  auto with = [](std::string_view descr, std::string_view fortran_order, std::string_view shape) {
    return Parse(NpyBytes(1,
                          std::string("{'descr': '") + std::string(descr) + "', 'fortran_order': " +
                              std::string(fortran_order) + ", 'shape': " + std::string(shape) + "}",
                          Floats(12)));
  };
  EXPECT_TRUE(FailsWith(with("|u1", "False", "(48,)"),
                        {"in.npy: unsupported dtype '|u1'", "'<f8', '<f4'"}));
  EXPECT_TRUE(FailsWith(with("<u4", "False", "(12,)"), {"unsupported dtype '<u4'"}));
  EXPECT_TRUE(FailsWith(with("<c8", "False", "(6,)"), {"unsupported dtype '<c8'"}));
  EXPECT_TRUE(FailsWith(with("=f4", "False", "(12,)"), {"unsupported dtype '=f4'"}));
  EXPECT_TRUE(FailsWith(with(">f4", "False", "(12,)"),
                        {"in.npy: big-endian dtype '>f4' is not supported"}));
  EXPECT_TRUE(FailsWith(with(">i8", "False", "(6,)"), {"big-endian"}));
  EXPECT_TRUE(
      FailsWith(with("<f4", "True", "(3, 4)"), {"in.npy: Fortran-order arrays are not supported"}));
}

TEST(NpyTest, RejectsDataOfTheWrongSize) {
  EXPECT_TRUE(
      FailsWith(Parse(NpyBytes(1, kF32Header34, Floats(11))),
                {"in.npy: data size mismatch: shape (3, 4) of '<f4' needs 48 bytes but only 44"}));
  EXPECT_TRUE(FailsWith(Parse(NpyBytes(1, kF32Header34, Floats(12) + "xyz")),
                        {"in.npy: trailing garbage: 3 bytes follow the 48 bytes of data"}));
  EXPECT_TRUE(FailsWith(
      Parse(NpyBytes(
          1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296)}", "")),
      {"shape (4294967296, 4294967296) is too large"}));
  // A zero-sized dimension makes the tensor empty, but the other dimensions must still
  // have a product that fits.
  EXPECT_TRUE(FailsWith(
      Parse(NpyBytes(
          1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 0)}", "")),
      {"shape (4294967296, 4294967296, 0) is too large"}));
  absl::StatusOr<Tensor> empty = Parse(
      NpyBytes(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 0, 1000)}", ""));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->num_elements(), 0);
  EXPECT_EQ(empty->shape(), (std::vector<int64_t>{4294967296, 0, 1000}));
}

// ReadNpy reads in the order the format is checked: a device that never ends fails on
// its first bytes, a file is read only as far as its header promises (plus one byte), and
// the usual size errors still come out.
TEST(NpyTest, ReadNpyReadsOnlyWhatTheHeaderPromises) {
  EXPECT_TRUE(FailsWith(ReadNpy("/dev/zero"), {"/dev/zero: not a .npy file (bad magic string)"}));
  const std::string dir = ::testing::TempDir();
  auto write = [&](const std::string& name, const std::string& bytes) {
    std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
    return dir + "/" + name;
  };
  absl::StatusOr<Tensor> good = ReadNpy(write("good.npy", NpyBytes(1, kF32Header34, Floats(12))));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_TRUE(FailsWith(ReadNpy(write("short.npy", NpyBytes(1, kF32Header34, Floats(11)))),
                        {"needs 48 bytes but only 44"}));
  EXPECT_TRUE(
      FailsWith(ReadNpy(write("long.npy", NpyBytes(1, kF32Header34, Floats(12) + "xyz"))),
                {"long.npy: trailing garbage: the file goes on past the"}));
  // A version 2.0 preamble promising a 4 GiB header is refused before reading it.
  std::string huge_header = std::string("\x93NUMPY\x02\x00", 8) + std::string("\xff\xff\xff\xff", 4);
  EXPECT_TRUE(FailsWith(ReadNpy(write("huge_header.npy", huge_header)),
                        {"the header length 4294967295 is over the 1048576 bytes"}));
}

TEST(NpyTest, FilesRoundTripAndErrorsNameThePath) {
  const std::string path = ::testing::TempDir() + "/npy_test_round_trip.npy";
  const Tensor original = Sample(ElementType::kI32, {4, 5});
  ASSERT_TRUE(WriteNpy(path, original).ok());
  absl::StatusOr<Tensor> back = ReadNpy(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->BitwiseEqual(original));

  const std::string missing = ::testing::TempDir() + "/npy_test_missing.npy";
  absl::StatusOr<Tensor> not_found = ReadNpy(missing);
  EXPECT_EQ(not_found.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(not_found.status().message(), missing));

  const absl::Status unwritable = WriteNpy(::testing::TempDir() + "/no/such/dir/x.npy", original);
  EXPECT_FALSE(unwritable.ok());
  EXPECT_TRUE(absl::StrContains(unwritable.message(), "/no/such/dir/x.npy"));

  const std::string garbage = ::testing::TempDir() + "/npy_test_garbage.npy";
  ASSERT_TRUE(WriteNpy(garbage, original).ok());
  std::FILE* file = std::fopen(garbage.c_str(), "ab");
  ASSERT_NE(file, nullptr);
  std::fputs("!", file);
  std::fclose(file);
  EXPECT_TRUE(FailsWith(ReadNpy(garbage), {garbage, "trailing garbage"}));
}

TEST(NpyTest, ConvertChecksShape) {
  const Tensor loaded(ElementType::kF32, {3, 4});
  const std::vector<int64_t> want = {4, 4};
  EXPECT_TRUE(FailsWith(ConvertLoadedToArgumentType(loaded, ElementType::kF32, want, "%x"),
                        {"input %x: .npy has shape (3, 4) but the argument is f32[4, 4]"}));
  EXPECT_TRUE(
      FailsWith(ConvertLoadedToArgumentType(Tensor(ElementType::kF32, {4}), ElementType::kBF16,
                                            std::vector<int64_t>{}, "%s"),
                {"input %s: .npy has shape (4,) but the argument is bf16[]"}));
}

TEST(NpyTest, ConvertAllowsOnlyFloat32ToSixteenBitFloats) {
  const std::vector<int64_t> shape = {2};
  const Tensor same = Sample(ElementType::kI64, shape);
  absl::StatusOr<Tensor> kept = ConvertLoadedToArgumentType(same, ElementType::kI64, shape, "%x");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_TRUE(kept->BitwiseEqual(same));

  EXPECT_TRUE(FailsWith(
      ConvertLoadedToArgumentType(Tensor(ElementType::kF64, shape), ElementType::kF32, shape, "%w"),
      {"input %w: .npy has element type f64 but the argument is f32[2]"}));
  EXPECT_TRUE(FailsWith(
      ConvertLoadedToArgumentType(Tensor(ElementType::kI32, shape), ElementType::kI64, shape, "%w"),
      {"element type i32 but the argument is i64[2]"}));
  EXPECT_TRUE(
      FailsWith(ConvertLoadedToArgumentType(Tensor(ElementType::kF16, shape), ElementType::kBF16,
                                            shape, "%w"),
                {"element type f16 but the argument is bf16[2]", "take float32 .npy files"}));
  EXPECT_TRUE(FailsWith(
      ConvertLoadedToArgumentType(Tensor(ElementType::kF64, shape), ElementType::kF16, shape, "%w"),
      {"element type f64 but the argument is f16[2]"}));
}

TEST(NpyTest, ConvertRoundsFloat32ToNearestEven) {
  // Halfway cases: 1 + half an ulp rounds down to 1 (even), 1 + 1.5 ulp up to 1 + 2 ulp.
  const std::vector<int64_t> shape = {3};
  const Tensor loaded = Tensor::FromFloat(
      ElementType::kF32, shape, std::vector<float>{1.0f + 0x1p-8f, 1.0f + 0x3p-8f, -0.1f});
  absl::StatusOr<Tensor> bf16 =
      ConvertLoadedToArgumentType(loaded, ElementType::kBF16, shape, "%x");
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_EQ(bf16->element_type(), ElementType::kBF16);
  EXPECT_EQ(bf16->GetAsDouble(0), 1.0);
  EXPECT_EQ(bf16->GetAsDouble(1), 1.0 + 0x1p-6);
  EXPECT_EQ(bf16->data<uint16_t>()[2], 0xbdcd);  // -0.1 in bfloat16 (0xbdcccccd rounded)

  const Tensor loaded16 = Tensor::FromFloat(
      ElementType::kF32, shape, std::vector<float>{1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 65520.0f});
  absl::StatusOr<Tensor> f16 =
      ConvertLoadedToArgumentType(loaded16, ElementType::kF16, shape, "%x");
  ASSERT_TRUE(f16.ok()) << f16.status();
  EXPECT_EQ(f16->GetAsDouble(0), 1.0);
  EXPECT_EQ(f16->GetAsDouble(1), 1.0 + 0x1p-9);
  EXPECT_EQ(f16->data<uint16_t>()[2], 0x7c00);  // Past the largest half: +inf.
}

}  // namespace
}  // namespace commir::runtime
