// The binary interface of one generated kernel: which storage buffer goes to which binding, how
// each buffer is accessed, and the layout of its parameter block (header words, then one 32-bit
// word per kernel param). The single source of truth for both Ember's GPU backends (pipeline
// layouts, push-constant sizes, which dialect variant prints the kernel) and em.export's
// manifest (export/), so an exported kernel is bound exactly as Ember binds it.
#pragma once
#include <string>
#include <vector>

#include "codegen/dialect.h"
#include "core/ir/node.h"
#include "core/target/target.h"

namespace ember {

// The API a kernel is printed and bound for.
enum class KernelApi { vulkan_glsl, vulkan_hlsl, opengl, d3d11_hlsl, cpp };
// The interface a target's kernels are bound with: Vulkan with GLSL or HLSL, OpenGL, D3D11 HLSL;
// cpu and cuda take the kernel's own param words (the cuda runner builds EmberArgs).
KernelApi kernel_api(const TargetInfo& target);

enum class BufferAccess { read, write, read_write };
const char* access_name(BufferAccess a);

// One storage buffer of a kernel: kernel->memories[binding] at `binding` (set 0).
struct KernelBinding {
  int binding = 0;
  const Node* memory = nullptr;
  BufferAccess access = BufferAccess::read_write;
  std::string var;   // its name in the source: m<binding>
  std::string elem;  // its array's element type in the source: uint, int or float
};

enum class ParamBlockKind { push_constant, uniform_block, storage_buffer, cbuffer, word_array };
const char* param_block_kind_name(ParamBlockKind k);

// One 32-bit word of the parameter block; `value` is kernel->params[i] (null for the header
// words `threads` and `row`).
struct ParamField {
  std::string name;
  DType type = DType::u32;
  int offset = 0;  // bytes
  const Node* value = nullptr;
};

struct ParamBlock {
  ParamBlockKind kind = ParamBlockKind::push_constant;
  int binding = -1;    // -1: none (push constants, the C++ params argument)
  std::string layout;  // std430, std140, hlsl_cbuffer or words
  int size = 0;        // bytes
  int header_words = 0;
  std::vector<ParamField> fields;
};

struct KernelAbi {
  KernelApi api = KernelApi::vulkan_glsl;
  std::vector<KernelBinding> bindings;
  ParamBlock params;
  int local_size = 0;  // threads per workgroup (0 for cpp)
  bool float_atomic_add = false;  // GLSL printed with native float atomic add
  bool fast_math = false;         // GLSL/HLSL printed with the builtin math functions (codegen/shader_math.h)
};

// Device facts the layout depends on; the defaults are what every device guarantees (exports).
struct AbiLimits {
  int max_push_bytes = 128;       // Vulkan maxPushConstantsSize
  bool float_atomic_add = false;  // native f32 atomic add (Vulkan GLSL only)
  bool fast_math = false;         // not a device fact: the program's CodegenOptions::fast_math
};

// The interface of `kernel` (after split_host) for `api`.
KernelAbi kernel_abi(const Node* kernel, KernelApi api, const AbiLimits& limits = {});

// The dialect table that prints a kernel with this interface.
const Dialect& abi_dialect(const KernelAbi& abi);

}  // namespace ember
