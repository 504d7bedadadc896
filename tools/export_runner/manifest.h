// manifest.json of an Ember export (docs/export.md), read into checked structs: every name a
// step, binding or expression uses is resolved here, so a bad manifest fails before anything
// runs, with the JSON path of the problem.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "expr.h"
#include "json.h"
#include "npy.h"

namespace runner {

struct DimSpec {
  std::string name;
  std::string from_input;  // bound from this input's shape ...
  int axis = 0;            // ... along this axis
  std::optional<int64_t> value;  // or fixed in the manifest
};

struct ScalarSpec {
  std::string name;
  DType dtype = DType::f32;
  std::optional<Num> default_value;
};

enum class Role { input, output, inout, temp, state };

struct BufferSpec {
  std::string name;
  Role role = Role::temp;
  DType dtype = DType::f32;
  std::vector<Expr> shape;  // each extent
  Expr count;               // elements
  bool zero_init = false;
};

struct BindingSpec {
  int set = 0, binding = 0;
  int buffer = -1;          // index into Manifest::buffers
  std::string access;       // read | write | read_write
};

struct ParamField {
  std::string name;
  std::string type;  // u32 | i32 | f32 | bool
  int offset = 0;
};

struct ParamBlock {
  std::string kind;  // push_constant | uniform_block | storage_buffer | cbuffer | none
  int set = 0, binding = -1;
  std::string layout;
  int size = 0;
  std::vector<ParamField> fields;
};

struct KernelSpec {
  std::string name, file, source, entry = "main";
  std::array<int, 3> workgroup_size{1, 1, 1};
  std::vector<BindingSpec> bindings;
  ParamBlock params;
};

struct Step {
  enum Op { dispatch, loop, if_, copy, fill, readback, let } op;
  std::string where;  // JSON path, for errors at run time
  // dispatch
  int kernel = -1;
  std::array<std::optional<Expr>, 3> groups;
  std::vector<std::pair<int, Expr>> param_values;  // field index -> value
  // loop: var in [begin, begin + count) (or begin/end/step); if: cond
  std::string var;
  std::optional<Expr> count, begin, end, step, cond;
  std::vector<Step> body, else_body;
  // copy / fill / readback / set
  int src = -1, dst = -1, buffer = -1;
  std::optional<Expr> src_offset, dst_offset, offset, value, index;
  std::string into;
  std::optional<uint32_t> fill_word;   // fill: a raw 32-bit word (a JSON integer)
  std::optional<DType> dtype;          // let: the value's dtype; readback: how the word reads
};

// A return value of the program: a buffer, or a host value (an expression of the plan's names).
struct OutputSpec {
  int index = 0;
  std::string buffer;
  std::optional<Expr> value;
  DType dtype = DType::f32;
};

struct Manifest {
  std::string dir;  // the export folder
  std::string program, target;
  int version = 0;
  std::vector<DimSpec> dims;
  std::vector<ScalarSpec> scalars;
  std::vector<BufferSpec> buffers;
  std::vector<KernelSpec> kernels;
  std::vector<Step> plan;
  std::vector<OutputSpec> outputs;

  int buffer_index(const std::string& name) const;
};

// Reads DIR/manifest.json; throws std::runtime_error naming the file and the JSON path.
Manifest load_manifest(const std::string& dir);

}  // namespace runner
