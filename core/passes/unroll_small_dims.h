// Register unrolling of small trailing dimensions: a kernel whose last axis is a constant of 2
// to 4 (xyz, rgba) runs that axis inside one thread. Work that does not depend on the axis is
// done once instead of per lane (e.g. a pairwise distance shared by the x, y, z forces).
#pragma once
#include "core/ir/node.h"

namespace ember {

bool unroll_small_dims(Program& p);

}  // namespace ember
