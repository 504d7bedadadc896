#include "core/ir/shape.h"

namespace ember {

int64_t const_dim(const Node* d) { return d && d->op == Op::constant ? d->i() : -1; }

bool same_dim(const Node* a, const Node* b) {
  if (a == b) return true;
  int64_t ca = const_dim(a), cb = const_dim(b);
  return ca >= 0 && ca == cb;
}

bool same_shape(const Shape& a, const Shape& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!same_dim(a[i], b[i])) return false;
  return true;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    const Node* d = s[i];
    if (const_dim(d) >= 0) out += std::to_string(const_dim(d));
    else if (!d->name.empty()) out += d->name;
    else out += "%" + std::to_string(d->id);
  }
  return out + "]";
}

int64_t const_size(const Shape& s) {
  int64_t n = 1;
  for (Node* d : s) {
    int64_t c = const_dim(d);
    if (c < 0) return -1;
    n *= c;
  }
  return n;
}

}  // namespace ember
