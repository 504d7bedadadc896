// The host plan as an artifact: what the host does to run a lowered program (after split_host),
// as data instead of IR — the buffers to allocate, each kernel's interface (backends/kernel_abi.h,
// the layout Ember's own backends bind), and the steps (dispatch, loop, if, let, copy, fill,
// readback) with every count and parameter value an expression of the symbolic dims and scalars
// (export/plan_expr.h). em.export writes it as manifest.json (export/manifest_json.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/kernel_abi.h"
#include "core/ir/node.h"

namespace ember {

struct PlanArg {
  std::string name;
  bool buffer = true;  // a tensor (in buffers) or a scalar (in scalars)
};

// A symbolic dim, bound from an input's shape (fixed at export when value >= 0).
struct PlanDim {
  std::string name, input;
  int axis = 0;
  int64_t value = -1;
};

struct PlanScalar {
  std::string name;
  DType dtype = DType::f32;
};

enum class BufferRole { input, output, inout, temp, state };
const char* buffer_role_name(BufferRole r);

struct PlanBuffer {
  std::string name;
  const Node* node = nullptr;  // the input or buffer node
  BufferRole role = BufferRole::temp;
  DType dtype = DType::f32;
  std::vector<std::string> shape;
  std::string count;
  bool zero_init = false;
};

// A return value: a buffer, or a host scalar expression.
struct PlanOutput {
  int index = 0;
  std::string buffer;
  std::string value;
  DType dtype = DType::f32;
};

// One kernel node of the program and the interface it is bound through. Kernels with equal
// bodies share a file: `file_of` is the index of the kernel whose file this one runs (in a runtime
// plan, build_runtime_plan, always its own index: the runtime does not group kernels there).
struct PlanKernel {
  std::string name;  // <program>_k<i>
  const Node* kernel = nullptr;
  KernelAbi abi;
  size_t file_of = 0;
  std::vector<std::string> binding_buffers;  // per abi binding, the plan buffer's name
};

struct PlanStep {
  // store: runtime plans only (no manifest form): `value` (of `dtype`) written to element `index` of `buffer`.
  enum class Kind { dispatch, loop, if_, let, copy, fill, readback, store };
  Kind kind = Kind::dispatch;
  size_t kernel = 0;                                         // dispatch: index into HostPlan::kernels
  std::string threads;                                       // dispatch
  std::vector<std::string> shape;  // dispatch: the kernel's index space per axis (the runtime's dims; not in the manifest)
  std::vector<std::string> groups;                           // dispatch (GPU APIs)
  std::vector<std::pair<std::string, std::string>> params;   // dispatch: field -> value
  std::string var, begin, end, step;                         // loop; let (var)
  std::string cond;                                          // if
  std::string value;                                         // let, store
  DType dtype = DType::i32;                                  // let, readback, store
  std::string buffer, src, dst, count, index, into;          // fill (buffer, count), copy, readback, store
  int64_t fill_word = 0;                                     // fill
  std::vector<PlanStep> body, else_body;                     // loop and if (then/else)
  // let, runtime plans only (build_runtime_plan; no manifest form): `value` is this IR node,
  // computed as the interpreter computes host scalars from the named values in `leaves`.
  const Node* node = nullptr;
  std::vector<std::pair<const Node*, std::string>> leaves;
};

struct HostPlan {
  std::string program;
  KernelApi api = KernelApi::vulkan_glsl;
  std::vector<PlanArg> args;
  std::vector<PlanDim> dims;
  std::vector<PlanScalar> scalars;
  std::vector<PlanBuffer> buffers;
  std::vector<PlanOutput> outputs;
  std::vector<PlanKernel> kernels;
  std::vector<PlanStep> steps;
  // Runtime plans only: `let`s of IR values known from the dims and scalars alone, computed
  // before the buffers are allocated (their sizes may need them).
  std::vector<PlanStep> prologue;
};

// The plan of `p` (lowered through split_host) for kernels printed and bound for `api`.
// `fixed` gives the dims fixed at export (by name; the others stay symbolic), `traced` the
// program before they were replaced by constants (where they are found in the inputs' shapes).
// Throws CompileError naming the step and the user's source line for a host step the plan
// cannot express.
HostPlan build_host_plan(const Program& p, KernelApi api, const std::vector<std::pair<std::string, int64_t>>& fixed = {},
                         const Program* traced = nullptr);

// The plan Ember's runtime runs (backends/plan_executor.h): build_host_plan's plan, where host
// scalar math outside the manifest's grammar (float math, bit operations) is a `let` of the IR
// value (PlanStep::node) instead of a CompileError. Other unexpressible steps still throw.
HostPlan build_runtime_plan(const Program& p, KernelApi api);

}  // namespace ember
