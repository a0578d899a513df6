#include "core/dtype.h"

#include <array>
#include <cctype>
#include <string>

namespace deltafin {
namespace {
struct Row {
  std::string_view name;
  BlockGeometry geom;
};
// Indexed by ggml_type id. Sizes follow the block layouts in ggml (QK_K = 256).
constexpr std::array<Row, kDTypeCount> kTable = [] {
  std::array<Row, kDTypeCount> t{};
  t[0] = {"F32", {1, 4}};
  t[1] = {"F16", {1, 2}};
  t[2] = {"Q4_0", {32, 18}};
  t[3] = {"Q4_1", {32, 20}};
  t[6] = {"Q5_0", {32, 22}};
  t[7] = {"Q5_1", {32, 24}};
  t[8] = {"Q8_0", {32, 34}};
  t[9] = {"Q8_1", {32, 36}};
  t[10] = {"Q2_K", {256, 84}};
  t[11] = {"Q3_K", {256, 110}};
  t[12] = {"Q4_K", {256, 144}};
  t[13] = {"Q5_K", {256, 176}};
  t[14] = {"Q6_K", {256, 210}};
  t[15] = {"Q8_K", {256, 292}};
  t[16] = {"IQ2_XXS", {256, 66}};
  t[17] = {"IQ2_XS", {256, 74}};
  t[18] = {"IQ3_XXS", {256, 98}};
  t[19] = {"IQ1_S", {256, 50}};
  t[20] = {"IQ4_NL", {32, 18}};
  t[21] = {"IQ3_S", {256, 110}};
  t[22] = {"IQ2_S", {256, 82}};
  t[23] = {"IQ4_XS", {256, 136}};
  t[24] = {"I8", {1, 1}};
  t[25] = {"I16", {1, 2}};
  t[26] = {"I32", {1, 4}};
  t[27] = {"I64", {1, 8}};
  t[28] = {"F64", {1, 8}};
  t[29] = {"IQ1_M", {256, 56}};
  t[30] = {"BF16", {1, 2}};
  t[34] = {"TQ1_0", {256, 54}};
  t[35] = {"TQ2_0", {256, 66}};
  t[39] = {"MXFP4", {32, 17}};
  return t;
}();
}  // namespace

BlockGeometry block_geometry(DType t) {
  auto i = static_cast<uint32_t>(t);
  return i < kDTypeCount ? kTable[i].geom : BlockGeometry{0, 0};
}

bool dtype_known(uint32_t id) { return id < kDTypeCount && kTable[id].geom.block_elems != 0; }

std::string_view dtype_name(DType t) {
  auto i = static_cast<uint32_t>(t);
  return dtype_known(i) ? kTable[i].name : std::string_view("unknown");
}

bool dtype_from_name(std::string_view name, DType* out) {
  std::string up(name);
  for (char& c : up) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (uint32_t i = 0; i < kDTypeCount; ++i) {
    if (kTable[i].geom.block_elems && kTable[i].name == up) {
      *out = static_cast<DType>(i);
      return true;
    }
  }
  return false;
}

}  // namespace deltafin
