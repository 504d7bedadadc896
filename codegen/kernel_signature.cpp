// Kernel signatures (kernel_signature.h): a pre-order walk of the kernel's body that names every
// reference by what it is to the kernel (a position, a slot or a value), hashed for grouping and
// compared node by node for the exact check.
#include "codegen/kernel_signature.h"

#include <unordered_map>

#include "core/support/hash.h"

namespace ember {

KernelBody::KernelBody(const Node* k) : k_(k) {
  collect(k);
  for (size_t i = 0; i < nodes_.size(); ++i) slot_[nodes_[i]] = {RefKind::local, i};
  for (size_t i = 0; i < k->memories().size(); ++i) slot_.emplace(k->memories()[i], KernelRef{RefKind::memory, i});
  for (size_t i = 0; i < k->params().size(); ++i) slot_.emplace(k->params()[i], KernelRef{RefKind::param, i});
}

void KernelBody::collect(const Node* s) {
  for (const Node* c = s->first_child; c; c = c->next) {
    nodes_.push_back(c);
    collect(c);
  }
}

KernelRef KernelBody::ref(const Node* o) const {
  if (o->op == Op::constant)
    return {RefKind::constant, (static_cast<uint64_t>(o->dtype) << 32) | o->bits};  // inlined by value
  if (o == k_) return {RefKind::self, 0};
  auto it = slot_.find(o);
  if (it != slot_.end()) return it->second;
  return {RefKind::foreign, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(o))};
}

bool operands_commute(const Node* n) {
  switch (n->op) {
    case Op::add: case Op::mul: case Op::eq: case Op::ne: case Op::land: case Op::lor: case Op::band:
    case Op::bor: case Op::bxor:
      return n->operands.size() == 2;
    default:
      return false;
  }
}

bool KernelBody::swapped(const Node* n) const {
  return operands_commute(n) && ref(n->operand(1)) < ref(n->operand(0));
}

std::vector<KernelRef> KernelBody::operand_refs(const Node* n) const {
  std::vector<KernelRef> out;
  out.reserve(n->operands.size());
  for (const Node* o : n->operands) out.push_back(ref(o));
  if (swapped(n)) std::swap(out[0], out[1]);
  return out;
}

namespace {

int children(const Node* n) {
  int c = 0;
  for (const Node* x = n->first_child; x; x = x->next) ++c;
  return c;
}

// The kernel node's attributes without its identity (kernel id and name).
NodeAttrs body_attrs(const Node* k) {
  NodeAttrs a;
  copy_attrs(a, *k);
  a.index = -1;
  a.name.clear();
  return a;
}

struct Hasher {
  uint64_t h = kFnvOffset;  // FNV's constants (core/support/hash.h) with a word-wise combine
  void add(uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= kFnvPrime;
  }
  void add(const KernelRef& r) {
    add(static_cast<uint64_t>(r.kind));
    add(r.value);
  }
};

// What every node contributes besides its attributes, for the hash and for the comparison.
void hash_node(Hasher& hs, const KernelBody& b, const Node* n) {
  hs.add(static_cast<uint64_t>(n->op));
  hs.add(static_cast<uint64_t>(n->dtype));
  hs.add(n->users.size());
  hs.add(static_cast<uint64_t>(children(n)));
  hs.add(n->shape.size());
  for (const Node* d : n->shape) hs.add(b.ref(d));
  hs.add(n->operands.size());
  for (const KernelRef& r : b.operand_refs(n)) hs.add(r);
}

bool same_node(const KernelBody& ba, const Node* a, const KernelBody& bb, const Node* b) {
  if (a->op != b->op || a->dtype != b->dtype || a->users.size() != b->users.size() ||
      a->shape.size() != b->shape.size() || a->operands.size() != b->operands.size() || children(a) != children(b))
    return false;
  for (size_t i = 0; i < a->shape.size(); ++i)
    if (!(ba.ref(a->shape[i]) == bb.ref(b->shape[i]))) return false;
  return ba.operand_refs(a) == bb.operand_refs(b);
}

bool same_bindings(const Node* a, const Node* b) {
  if (a->memories().size() != b->memories().size() || a->params().size() != b->params().size()) return false;
  for (size_t i = 0; i < a->memories().size(); ++i)
    if (a->memories()[i]->dtype != b->memories()[i]->dtype) return false;
  for (size_t i = 0; i < a->params().size(); ++i)
    if (a->params()[i]->dtype != b->params()[i]->dtype) return false;
  return true;
}

}  // namespace

uint64_t kernel_signature_hash(const Node* k) {
  EMBER_INTERNAL_ASSERT(k->op == Op::kernel, "kernel_signature_hash on " << op_name(k->op));
  KernelBody b(k);
  Hasher hs;
  hash_node(hs, b, k);
  hs.add(hash_attrs(body_attrs(k)));
  hs.add(k->memories().size());
  for (const Node* m : k->memories()) hs.add(static_cast<uint64_t>(m->dtype));
  hs.add(k->params().size());
  for (const Node* p : k->params()) hs.add(static_cast<uint64_t>(p->dtype));
  hs.add(b.nodes().size());
  for (const Node* n : b.nodes()) {
    hash_node(hs, b, n);
    hs.add(hash_attrs(*n));
  }
  return hs.h;
}

bool same_kernel_body(const Node* a, const Node* b) {
  EMBER_INTERNAL_ASSERT(a->op == Op::kernel && b->op == Op::kernel, "same_kernel_body on non-kernels");
  if (a == b) return true;
  if (!same_bindings(a, b)) return false;
  KernelBody ba(a), bb(b);
  if (ba.nodes().size() != bb.nodes().size()) return false;
  if (!same_node(ba, a, bb, b) || !same_attrs(body_attrs(a), body_attrs(b))) return false;
  for (size_t i = 0; i < ba.nodes().size(); ++i) {
    const Node* x = ba.nodes()[i];
    const Node* y = bb.nodes()[i];
    if (!same_node(ba, x, bb, y) || !same_attrs(*x, *y)) return false;
  }
  return true;
}

KernelClasses group_kernels(const Program& p) {
  KernelClasses kc;
  p.for_each([&](Node* n) {
    if (n->op == Op::kernel) kc.kernels.push_back(n);
  });
  std::unordered_map<uint64_t, std::vector<int>> by_hash;  // signature hash -> classes
  for (const Node* k : kc.kernels) {
    std::vector<int>& candidates = by_hash[kernel_signature_hash(k)];
    int found = -1;
    for (int c : candidates)
      if (same_kernel_body(kc.members[static_cast<size_t>(c)][0], k)) {
        found = c;
        break;
      }
    if (found < 0) {
      found = static_cast<int>(kc.members.size());
      kc.members.emplace_back();
      candidates.push_back(found);
    }
    kc.members[static_cast<size_t>(found)].push_back(k);
    kc.class_of.push_back(found);
  }
  return kc;
}

}  // namespace ember
