// Layout staging for the CPU printer: a read-only memory that a kernel-uniform loop walks with a
// small constant stride (xyz positions read as X[3*j + c] by every thread's j loop) is copied
// once per launch into one contiguous row per lane c, so the loop's loads are unit-stride and
// vectorize without shuffles or gathers -- the structure-of-arrays copy a hand-written kernel
// makes, without a second kernel. Only dialects with Dialect::stage_fill use it.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/ir/node.h"

namespace ember {

// One staged copy: memory[stride * (loop.begin + t) + lane] -> row lane, column t.
struct StagingGroup {
  const Node* memory = nullptr;
  const Node* loop = nullptr;
  int64_t stride = 0;
};

struct StagedLoad {
  int group = 0;
  int64_t lane = 0;
};

struct Staging {
  std::vector<StagingGroup> groups;
  std::unordered_map<const Node*, StagedLoad> loads;  // flat load -> where it reads now
};

// Finds the stageable loads of a kernel after split_host (flat indices).
Staging find_staging(const Node* kernel);

}  // namespace ember
