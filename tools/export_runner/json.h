// A small JSON reader for the export runner (manifest.json): objects, arrays, strings (with
// \uXXXX escapes, surrogate pairs included), numbers, true/false/null. Errors name the line and
// column. Only what the runner needs; no writer.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace runner {

class Json {
 public:
  enum class Kind { null, boolean, number, string, array, object };

  Kind kind = Kind::null;
  bool b = false;
  double num = 0;
  bool is_integer = false;  // a number written without fraction or exponent
  std::string str;
  std::vector<Json> arr;
  std::vector<std::pair<std::string, Json>> obj;  // in file order

  // The member `key` of an object, or nullptr when absent (or when this is not an object).
  const Json* find(const std::string& key) const;
  bool is_object() const { return kind == Kind::object; }
  bool is_array() const { return kind == Kind::array; }
  bool is_string() const { return kind == Kind::string; }
  bool is_number() const { return kind == Kind::number; }
};

// Parses a whole JSON text; throws std::runtime_error("what: line L, column C: ...") on errors.
Json parse_json(const std::string& text, const std::string& what);

}  // namespace runner
