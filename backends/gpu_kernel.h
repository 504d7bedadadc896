// What a GPU runtime needs to know about a kernel of a lowered program, shared by the Vulkan and
// OpenGL backends: the memory slots it reads and writes (barriers between dependent
// dispatches), the loops whose bounds the host knows at dispatch time (drivers that cap a
// shader's loop iterations), float atomic adds (native where the device has them), and the
// inputs a program stores into (copied back after a run).
#pragma once
#include <cstdint>
#include <vector>

#include "core/ir/node.h"

namespace ember {

// Which memory slots (kernel->memories) a kernel loads from and stores or atomically updates.
// Both empty when some access could not be attributed: then every memory counts both ways.
struct MemoryAccess {
  std::vector<char> reads, writes;
  bool reads_slot(size_t i) const { return reads.empty() || reads[i]; }
  bool writes_slot(size_t i) const { return writes.empty() || writes[i]; }
};
MemoryAccess memory_accesses(const Node* kernel);

// A loop of a kernel whose bounds the host knows at dispatch time (constants or params), for
// drivers that cap the loop iterations of one invocation (Mesa's llvmpipe: 65535 in total).
struct LoopBound {
  int parent = -1;               // enclosing loop in the list, -1 at the top
  int64_t value[3] = {0, 0, 0};  // begin, end, step: constants, or
  int param[3] = {-1, -1, -1};   // the param slot holding them (-2: thread-dependent)
};
// The loops of `kernel`, parents before their children.
std::vector<LoopBound> find_loops(const Node* kernel);
// The loop iterations one thread runs, as far as the host can tell from the params (loops with
// thread-dependent bounds count as one iteration; small constant loops, which drivers unroll,
// as none).
int64_t loop_iterations(const std::vector<LoopBound>& loops, const std::vector<uint32_t>& params);

// Whether `kernel` (or any scope) has an atomic add on f32 (native float atomics where the
// device has them; a compare-and-swap loop otherwise).
bool has_float_atomic_add(const Node* kernel);

// Argument positions of the inputs `p` stores into (device copies are written back to the
// caller's memory after each run).
std::vector<int> written_inputs(const Program& p);

}  // namespace ember
