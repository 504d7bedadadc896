// kernel_abi: bindings are memory slots; the parameter block is `threads`, `row` (GPU APIs),
// then one word per param, 4 bytes apart under every layout used (std430 push constants and
// storage buffers, std140 uniform blocks and HLSL cbuffers pack consecutive uint scalars
// tightly; the latter two round the block's size up to 16 bytes).
#include "backends/kernel_abi.h"

#include "backends/gpu_kernel.h"
#include "backends/gpu_runtime.h"

namespace ember {

const char* access_name(BufferAccess a) {
  return a == BufferAccess::read ? "read" : a == BufferAccess::write ? "write" : "read_write";
}

const char* param_block_kind_name(ParamBlockKind k) {
  switch (k) {
    case ParamBlockKind::push_constant: return "push_constant";
    case ParamBlockKind::uniform_block: return "uniform_block";
    case ParamBlockKind::storage_buffer: return "storage_buffer";
    case ParamBlockKind::cbuffer: return "cbuffer";
    case ParamBlockKind::word_array: return "word_array";
  }
  return "?";
}

namespace {

void set_block(ParamBlock& b, const Node* kernel, int header_words) {
  b.header_words = header_words;
  if (header_words > 0) {
    b.fields.push_back({"threads", DType::u32, 0, nullptr});
    b.fields.push_back({"row", DType::u32, 4, nullptr});
  }
  for (size_t i = 0; i < kernel->params().size(); ++i) {
    const Node* p = kernel->params()[i];
    b.fields.push_back({"p" + std::to_string(i), p->dtype, static_cast<int>((header_words + i) * 4), p});
  }
  b.size = static_cast<int>(b.fields.size() * 4);
  if (b.layout == "std140" || b.layout == "hlsl_cbuffer") b.size = (b.size + 15) / 16 * 16;
}

}  // namespace

KernelApi kernel_api(const TargetInfo& target) {
  switch (target.api) {
    case TargetApi::vulkan:
      return target.language == TargetLanguage::hlsl ? KernelApi::vulkan_hlsl : KernelApi::vulkan_glsl;
    case TargetApi::opengl: return KernelApi::opengl;
    case TargetApi::d3d11: return KernelApi::d3d11_hlsl;
    case TargetApi::host:
    case TargetApi::cuda: return KernelApi::cpp;
  }
  return KernelApi::cpp;
}

KernelAbi kernel_abi(const Node* kernel, KernelApi api, const AbiLimits& limits) {
  KernelAbi abi;
  abi.api = api;
  abi.fast_math = limits.fast_math;
  const bool gpu = api != KernelApi::cpp;
  const int header = gpu ? kGpuHeaderWords : 0;
  ParamBlock& b = abi.params;
  switch (api) {
    case KernelApi::vulkan_glsl:
    case KernelApi::vulkan_hlsl: {
      const int bytes = static_cast<int>((kernel->params().size() + header) * 4);
      const bool in_buffer = bytes > limits.max_push_bytes;
      b.kind = in_buffer ? ParamBlockKind::storage_buffer : ParamBlockKind::push_constant;
      b.binding = in_buffer ? static_cast<int>(kernel->memories().size()) : -1;
      b.layout = "std430";
      abi.float_atomic_add = api == KernelApi::vulkan_glsl && limits.float_atomic_add && has_float_atomic_add(kernel) &&
                             kernel->group.empty();  // group buffers' float atomics: compare-and-swap
      break;
    }
    case KernelApi::opengl:
      b.kind = ParamBlockKind::uniform_block;
      b.binding = 0;
      b.layout = "std140";
      abi.float_atomic_add = limits.float_atomic_add && has_float_atomic_add(kernel) && kernel->group.empty();
      break;
    case KernelApi::d3d11_hlsl:
      b.kind = ParamBlockKind::cbuffer;
      b.binding = 0;
      b.layout = "hlsl_cbuffer";
      break;
    case KernelApi::cpp:
      b.kind = ParamBlockKind::word_array;
      b.layout = "words";
      break;
  }
  set_block(b, kernel, header);
  if (gpu) abi.local_size = static_cast<int>(local_size(kernel, glsl_dialect().group_size));

  const Dialect& d = abi_dialect(abi);
  const MemoryAccess acc = memory_accesses(kernel);
  for (size_t i = 0; i < kernel->memories().size(); ++i) {
    KernelBinding kb;
    kb.binding = static_cast<int>(i);
    kb.memory = kernel->memories()[i];
    const bool r = acc.reads_slot(i), w = acc.writes_slot(i);
    kb.access = r && w ? BufferAccess::read_write : w ? BufferAccess::write : BufferAccess::read;
    kb.var = "m" + std::to_string(i);
    kb.elem = d.mem_type[dtype_slot(kb.memory->dtype)];
    if (api == KernelApi::cpp) kb.elem = kb.elem == "float" ? "float" : kb.elem == "int32_t" ? "int" : "uint";
    abi.bindings.push_back(std::move(kb));
  }
  return abi;
}

const Dialect& abi_dialect(const KernelAbi& abi) {
  const bool in_buffer = abi.params.kind == ParamBlockKind::storage_buffer;
  switch (abi.api) {
    case KernelApi::vulkan_hlsl: return hlsl_dialect(in_buffer, false, abi.fast_math);
    case KernelApi::d3d11_hlsl: return hlsl_dialect(false, true, abi.fast_math);
    case KernelApi::cpp: return cpp_dialect();
    case KernelApi::vulkan_glsl:
    case KernelApi::opengl: {
      GlslOptions o;
      o.opengl = abi.api == KernelApi::opengl;
      o.params_in_buffer = in_buffer;
      o.float_atomic_add = abi.float_atomic_add;
      o.fast_math = abi.fast_math;
      return glsl_dialect(o);
    }
  }
  return cpp_dialect();
}

}  // namespace ember
