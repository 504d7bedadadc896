// The compile steps the Vulkan and OpenGL backends share (issue 40, item 0): the kernels of a
// program grouped into classes of equal code (codegen/kernel_signature.h), each class printed on
// the compile pool, equal texts made one shader; after the backend builds each shader (SPIR-V and
// a pipeline, or a GL program, through its cache), every kernel bound to its shader's build and
// the compile's totals and cache key filled in. Only the build step is the backend's own.
#pragma once
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "backends/compile_cache.h"
#include "backends/compile_jobs.h"
#include "codegen/c_printer.h"
#include "codegen/kernel_signature.h"
#include "core/ir/error.h"

namespace ember {

// One class's shader as a backend prints it: its binding layout (the backend's own type), the
// generated kernel and the whole shader text.
template <class Layout>
struct PrintedShader {
  Layout layout;
  GeneratedKernel code;
  std::string source;
};

// The distinct shaders of a program: printed[c] for each class c, shader s is printed[first[s]].
template <class Layout>
struct ShaderSet {
  std::vector<PrintedShader<Layout>> printed;  // by class
  std::vector<size_t> first;                   // shader -> its first class
  std::vector<size_t> shader_of;               // class -> shader
  std::vector<size_t> users;                   // shader -> the kernels that run it
  size_t size() const { return first.size(); }
  const PrintedShader<Layout>& shader(size_t s) const { return printed[first[s]]; }
};

// print(representative kernel, PrintedShader&) prints one class; it runs on the compile pool, so
// it must not call the graphics API.
template <class Layout, class Print>
ShaderSet<Layout> print_shaders(const KernelClasses& classes, Print print) {
  ShaderSet<Layout> set;
  set.printed.resize(classes.size());
  parallel_for(classes.size(), compile_jobs(), [&](size_t c) { print(classes.representative(c), set.printed[c]); });
  std::unordered_map<std::string, size_t> by_text;
  set.shader_of.resize(classes.size());
  for (size_t c = 0; c < classes.size(); ++c) {
    auto [it, fresh] = by_text.emplace(set.printed[c].source, set.first.size());
    if (fresh) {
      set.first.push_back(c);
      set.users.push_back(0);
    }
    set.shader_of[c] = it->second;
    set.users[it->second] += classes.members[c].size();
  }
  return set;
}

// Every kernel of the program by id, bound to built[its shader]; fills info's distinct, compiled
// (`compiled` of the shaders were compiled, not found in a cache) and translation-unit counts, the
// cache hit and the cache key ("<backend>-" and a hash of the shaders' symbols).
template <class T, class Layout>
std::unordered_map<int, T> bind_shaders(const KernelClasses& classes, const ShaderSet<Layout>& set,
                                        const std::vector<T>& built, int compiled, const std::string& backend,
                                        CompileInfo& info) {
  std::string keys;
  for (size_t s = 0; s < set.size(); ++s) keys += set.shader(s).code.symbol + ";";
  std::unordered_map<int, T> kernels;
  for (size_t i = 0; i < classes.kernels.size(); ++i) {
    const Node* k = classes.kernels[i];
    EMBER_INTERNAL_ASSERT(!kernels.count(k->index), "two kernels share the id #" << k->index);
    kernels.emplace(k->index, built[set.shader_of[static_cast<size_t>(classes.class_of[i])]]);
  }
  info.distinct_kernels = static_cast<int>(set.size());
  info.compiled_kernels = info.translation_units = compiled;
  info.cache_hit = compiled == 0;
  info.cache_key = kernels.empty() ? "" : backend + "-" + content_hash(keys);
  return kernels;
}

}  // namespace ember
