// Register tiling: a kernel whose threads each run a loop that reads values shared with their
// neighbours along the last axis (a matmul's A[i, k] for every j) and data contiguous along it
// (B[k, j]) computes a tile of rows x columns of its last two axes per thread instead of one
// element. Each shared value is then loaded once per tile, the contiguous ones as vectors, the
// tile's accumulators live in registers and the loop runs once for the whole tile. A thread
// whose tile reaches past the kernel's shape runs its in-range elements one by one. For backends
// whose compiler vectorizes a thread's lanes (PipelineOptions::tile_threads: the CPU). Plain
// contractions (core/analysis/contraction.h) are left as they are: the cpp dialect computes
// them with packed panels (codegen/cpu_gemm.h), which a tiled kernel would hide.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool tile_threads(Program& p);

}  // namespace ember
