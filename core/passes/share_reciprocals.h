// Float divisions by one shared denominator become one reciprocal and products: x/d, y/d, z/d
// -> r = 1/d; x*r, y*r, z*r (a force direction scaled by 1/r^3). Each result may differ from
// the division by up to 2 ulp (documented in core/IR.md); a lone division is left alone.
#pragma once
#include "core/ir/node.h"

namespace ember {

bool share_reciprocals(Program& p);

}  // namespace ember
