// Splits codegen/shader_math_text.h into its pieces and sets the dialects' math templates
// (shader_math.h).
#include "codegen/shader_math.h"

#include <regex>

namespace ember {

namespace {

const char* const kShaderMathText =
#include "codegen/shader_math_text.inc"
    ;

constexpr const char* kPieceMark = "// ember-math-piece\n";

std::vector<GatedPrelude> split_pieces(bool device) {
  const std::string text = kShaderMathText;
  static const std::regex fn(R"((^|\n)(bool|int|uint|float) (ember_\w+\())");
  std::vector<GatedPrelude> out;
  size_t at = text.find(std::string("\n") + kPieceMark);  // a marker starts a line
  while (at != std::string::npos) {
    ++at;
    const size_t next = text.find(std::string("\n") + kPieceMark, at);
    GatedPrelude p;
    p.text = text.substr(at, (next == std::string::npos ? text.size() : next + 1) - at);
    // Its callers: whoever calls a function it defines.
    for (std::sregex_iterator it(p.text.begin(), p.text.end(), fn), end; it != end; ++it) p.callers.push_back((*it)[3]);
    if (device) p.text = std::regex_replace(p.text, fn, "$1__device__ inline $2 $3");
    out.push_back(std::move(p));
    at = next;
  }
  return out;
}

}  // namespace

std::vector<GatedPrelude> shader_math_pieces(bool device) {
  static const std::vector<GatedPrelude> plain = split_pieces(false), dev = split_pieces(true);
  return device ? dev : plain;
}

void set_shader_math(Dialect& d, bool fast, const BuiltinMath& b, bool device) {
  auto f = [&](Op op) -> std::string& { return d.expr[static_cast<int>(op)][value_class(DType::f32)]; };
  d.gated_prelude = shader_math_pieces(device);
  f(Op::asin) = "ember_asin({0})";
  f(Op::acos) = "ember_acos({0})";
  f(Op::atan) = "ember_atan({0})";
  f(Op::atan2) = "ember_atan2({0}, {1})";
  if (fast) {
    f(Op::exp) = b.exp;
    f(Op::exp2) = b.exp2;
    f(Op::log) = "ember_fast_log({0})";
    f(Op::log2) = "ember_fast_log2({0})";
    f(Op::sin) = b.sin;
    f(Op::cos) = b.cos;
    f(Op::tan) = b.tan;
    f(Op::sinh) = b.sinh;
    f(Op::cosh) = b.cosh;
    f(Op::tanh) = b.tanh;
    f(Op::pow) = "ember_fast_pow({0}, {1})";
    return;
  }
  for (Op op : {Op::exp, Op::exp2, Op::log, Op::log2, Op::sin, Op::cos, Op::tan, Op::sinh, Op::cosh, Op::tanh})
    f(op) = std::string("ember_") + op_name(op) + "({0})";
  f(Op::pow) = "ember_pow({0}, {1})";
}

}  // namespace ember
