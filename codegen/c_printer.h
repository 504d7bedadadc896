// The one C-like kernel printer (STYLE §7): walks the kernels of a program after split_host and
// prints them in a Dialect. Values are named by a per-kernel numbering (v0, v1, ...), never by
// Node::id, so equal programs print equal source: the source text is the compile-cache key.
#pragma once
#include <string>
#include <vector>

#include "codegen/dialect.h"
#include "core/ir/node.h"

namespace ember {

// One printed kernel: its node, its symbol ("ember_k<index>_<hash of its text>") and its
// source text (without the dialect prelude).
struct GeneratedKernel {
  const Node* kernel = nullptr;
  std::string symbol;
  std::string source;
};

// Kernel nodes of `p` in program order.
std::vector<const Node*> program_kernels(const Program& p);

// Prints one kernel node (with memories/params filled in by split_host).
GeneratedKernel generate_kernel(const Node* kernel, const Dialect& d);

// Prints every kernel of `p`, in program order.
std::vector<GeneratedKernel> generate_kernel_list(const Program& p, const Dialect& d);

// All kernels of `p` in one translation unit: the prelude, then each kernel.
std::string generate_kernels(const Program& p, const Dialect& d);
// The same, from an already generated list.
std::string join_kernels(const std::vector<GeneratedKernel>& kernels, const Dialect& d);

}  // namespace ember
