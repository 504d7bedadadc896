#include "core/passes/forward_copies.h"

#include <vector>

#include "core/analysis/dependence.h"
#include "core/ir/builder.h"
#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

// The store(dst, load(src)) of a kernel whose statements are only that copy, or null.
Node* whole_copy(DependenceAnalysis& dep, Node* k) {
  Node* store = nullptr;
  Node* load = nullptr;
  for (Node* c = k->first_child; c; c = c->next) {
    if (c->op == Op::index || c->op == Op::constant) continue;
    if (c->op == Op::load && !load) { load = c; continue; }
    if (c->op == Op::store && !store) { store = c; continue; }
    return nullptr;
  }
  if (!load || !store || store->operand(1) != load || load->users.size() != 1) return nullptr;
  if (!dep.own_element(load, k->shape) || !dep.own_element(store, k->shape)) return nullptr;
  Node* src = load->operand(0);
  Node* dst = store->operand(0);
  if (src->op != Op::buffer || dst->op != Op::buffer || src == dst || src->dtype != dst->dtype) return nullptr;
  if (!same_shape(src->shape, k->shape) || !same_shape(dst->shape, k->shape)) return nullptr;
  return store;
}

}  // namespace

bool forward_copies(Program& p) {
  std::vector<Node*> kernels;
  for (Node* k : kernels_of(p))
    if (k->group.empty()) kernels.push_back(k);
  bool changed = false;
  // One numbering for the whole pass: a replacement keeps the order of everything else, and the
  // move takes the position of the kernel it replaces.
  Positions pos = program_positions(p);
  DependenceAnalysis dep;
  for (Node* k : kernels) {
    Node* store = whole_copy(dep, k);
    if (!store) continue;
    Node* load = store->operand(1);
    Node* src = load->operand(0);
    Node* dst = store->operand(0);
    if (src->parent != k->parent) continue;  // a fresh allocation per run of this scope
    const int at = pos.at(k);
    bool ok = pos.at(src) < at;
    for (Node* u : src->users) ok &= u == load || pos.at(u) < at;     // src is dead after the copy
    for (Node* u : dst->users) ok &= u->op != Op::output || pos.at(u) > at;  // no earlier output shares dst
    if (!ok) continue;
    Builder b(p);
    b.set_insert_before(k);
    b.loc = k->loc;
    pos.set(b.raw(Op::move_memory, DType::none, {}, {dst, src}), at);
    p.erase(k);
    changed = true;
  }
  return changed;
}

}  // namespace ember
