#include "core/ir/verifier.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/analysis/uniformity.h"
#include "core/ir/printer.h"
#include "core/ir/shape.h"

namespace ember {

namespace {

class Verifier {
 public:
  Verifier(const Program& p, const VerifyOptions& o) : p_(p), opt_(o) {
    int k = 0;
    pos_.reserve(static_cast<size_t>(p.next_id()));
    pos_[p.root()] = k++;
    p.for_each([&](Node* n) { pos_[n] = k++; });
  }

  void run() {
    scope(p_.root());
    if (opt_.use_lists) use_lists();
  }

 private:
  [[noreturn]] void fail(const Node* n, const std::string& what) {
    throw_internal(__FILE__, __LINE__, "verify", what + "\n  at: " + print_node(p_, n) + "\n" + print_program(p_));
  }

  bool visible(const Node* def, const Node* use) {
    if (def->dead) return false;
    auto d = pos_.find(def);
    if (d == pos_.end()) return false;
    if (def->is_scope()) return use->inside(def);  // a loop used as its counter, inside itself
    if (d->second >= pos_.at(use)) return false;
    for (const Node* s = use->parent; s; s = s->parent)
      if (s == def->parent) return true;
    return false;
  }

  void scope(const Node* s) {
    const Node* prev = nullptr;
    for (const Node* c = s->first_child; c; prev = c, c = c->next) {
      if (c->parent != s || c->prev != prev) fail(c, "broken sibling/parent links");
      if (prev && prev->order >= c->order) fail(c, "order labels do not increase along the scope");
      node(c, prev);
      if (c->is_scope()) scope(c);
      else if (c->first_child) fail(c, "non-scope node has children");
    }
    if (s->last_child != prev) fail(s, "last_child is wrong");
  }

  void node(const Node* n, const Node* prev) {
    const OpInfo& info = op_info(n->op);
    if (n->dead) fail(n, "dead node still linked");
    if (info.arity >= 0 && n->num_operands() != info.arity) fail(n, "wrong operand count");
    for (const Node* o : n->operands) {
      if (!o) fail(n, "null operand");
      if (!visible(o, n)) fail(n, "operand " + print_node(p_, o) + " is not visible here");
    }
    for (const Node* d : n->shape) {
      if (d->dtype != DType::i32 || !d->shape.empty()) fail(n, "shape dims must be scalar i32");
      if (d->dead || d->enclosing_kernel()) fail(n, "shape dim must be a live host value");
    }
    Node* k = n->enclosing_kernel();
    if (k && (info.flags & F_HOST_ONLY)) fail(n, "host-only op inside a kernel");
    const bool own_shape = n->op == Op::group_buffer;  // a memory of its own size inside a kernel
    if (!own_shape && n->parent && !n->parent->shape.empty() && !n->shape.empty() && !same_shape(n->shape, n->parent->shape))
      fail(n, "shape " + shape_str(n->shape) + " differs from its scope's " + shape_str(n->parent->shape));
    if (!own_shape && k && !n->shape.empty() && !same_shape(n->shape, k->shape)) fail(n, "node shape differs from its kernel's");
    if (opt_.kernels_formed && !k && !n->shape.empty() && !(info.flags & F_MEMORY) && n->op != Op::kernel)
      fail(n, "non-scalar node outside a kernel after fusion");

    if (info.flags & F_ELEMENTWISE) {
      for (const Node* o : n->operands)
        if (!o->shape.empty() && !same_shape(o->shape, n->shape)) fail(n, "elementwise operand shape mismatch");
      if (info.rule == DTypeRule::Same)
        for (const Node* o : n->operands)
          if (o->dtype != n->dtype) fail(n, "operand dtype differs from result dtype");
      if (info.rule == DTypeRule::Float && (n->dtype != DType::f32 || n->operand(0)->dtype != DType::f32))
        fail(n, "float op on non-float");
      if (info.rule == DTypeRule::Bool && n->dtype != DType::boolean) fail(n, "comparison must be bool");
      if (n->op == Op::select && (n->operand(0)->dtype != DType::boolean || n->operand(1)->dtype != n->dtype ||
                                  n->operand(2)->dtype != n->dtype))
        fail(n, "select operand dtypes");
      if (n->op == Op::fma && (n->operand(1)->dtype != DType::f32 || n->operand(2)->dtype != DType::f32))
        fail(n, "fma operand dtypes");
    }
    switch (n->op) {
      case Op::load: case Op::store: case Op::atomic: {
        const Node* mem = n->operand(0);
        if (opt_.kernels_formed && !mem->is_memory()) fail(n, "memory access to a non-memory value after fusion");
        int nidx = n->num_operands() - n->first_index_operand();
        if (n->flat ? nidx != 1 : nidx != mem->rank()) fail(n, "index count does not match the memory's rank");
        for (int i = n->first_index_operand(); i < n->num_operands(); ++i) {
          const Node* ix = n->operand(i);
          if (ix->dtype != DType::i32 && ix->dtype != DType::u32) fail(n, "index is not an integer");
          if (!ix->shape.empty() && !same_shape(ix->shape, n->shape)) fail(n, "index shape mismatch");
        }
        if (n->op != Op::load && n->operand(1)->dtype != mem->dtype) fail(n, "stored value dtype differs");
        if (n->op != Op::store && n->dtype != mem->dtype) fail(n, "loaded dtype differs from memory dtype");
        break;
      }
      case Op::else_:
        if (!prev || prev->op != Op::if_) fail(n, "else must follow an if");
        break;
      case Op::break_: case Op::continue_: {
        bool in_loop = false;
        for (const Node* s = n->parent; s && s->op != Op::kernel; s = s->parent) in_loop |= s->op == Op::loop;
        if (!in_loop) fail(n, "break/continue outside a loop");
        break;
      }
      case Op::set:
        if (n->operand(0)->op != Op::var) fail(n, "set of a non-var");
        if (n->operand(1)->dtype != n->operand(0)->dtype) fail(n, "set dtype mismatch");
        break;
      case Op::if_:
        if (n->operand(0)->dtype != DType::boolean) fail(n, "if condition must be bool");
        break;
      case Op::loop:
        for (const Node* o : n->operands)
          if (o->dtype != DType::i32) fail(n, "loop bounds must be i32");
        break;
      case Op::kernel:
        if (n->enclosing_kernel()) fail(n, "nested kernel");
        if (!n->group.empty() && n->group.size() != n->shape.size()) fail(n, "group rank differs from the kernel's");
        for (int g : n->group)
          if (g < 1) fail(n, "group dims must be positive");
        break;
      case Op::group_buffer:
        if (!n->parent || n->parent->op != Op::kernel) fail(n, "a group buffer must be a direct child of a kernel");
        if (n->shape.empty() || const_size(n->shape) < 1) fail(n, "a group buffer needs constant positive dims");
        break;
      case Op::barrier: case Op::local_index: case Op::group_index: {
        if (!k || k->group.empty()) fail(n, "workgroup op outside a kernel with a group");
        if (n->op != Op::barrier && (n->axis < 0 || n->axis >= static_cast<int>(k->group.size()))) fail(n, "axis out of range");
        GroupUniformity u;
        if (n->op == Op::barrier && divergent_scope(n->parent, u)) fail(n, "barrier under non-uniform control flow");
        break;
      }
      default: break;
    }
  }

  // Use lists in both directions: x->users holds u exactly as often as u->operands holds x, and
  // x->dim_users holds u exactly as often as u->shape holds x, for every live node reachable
  // from the program (unlinked users included). Linear in the number of uses.
  void use_lists() {
    // Pointers mixed (multiply-xorshift): `a * 31 ^ b` of nearby heap addresses collides so much
    // that this check took most of the verifier's time on large programs.
    struct PairHash {
      size_t operator()(const std::pair<const Node*, const Node*>& k) const {
        uint64_t h = reinterpret_cast<uintptr_t>(k.first) * 0x9e3779b97f4a7c15ull;
        h ^= reinterpret_cast<uintptr_t>(k.second) + 0x632be59bd9b4e019ull + (h << 6) + (h >> 2);
        h *= 0xbf58476d1ce4e5b9ull;
        return static_cast<size_t>(h ^ (h >> 31));
      }
    };
    // (def, user) -> uses listed by the user minus uses listed by the def; all zero when in sync.
    std::unordered_map<std::pair<const Node*, const Node*>, int, PairHash> ops, dims;
    std::unordered_set<const Node*> done;
    ops.reserve(2 * pos_.size());
    dims.reserve(2 * pos_.size());
    done.reserve(pos_.size());
    std::vector<const Node*> work;
    auto visit = [&](const Node* x) {
      if (!x->dead && done.insert(x).second) work.push_back(x);
    };
    for (const auto& kv : pos_) visit(kv.first);
    while (!work.empty()) {
      const Node* x = work.back();
      work.pop_back();
      for (const Node* o : x->operands) { ++ops[{o, x}]; visit(o); }
      for (const Node* d : x->shape) { ++dims[{d, x}]; visit(d); }
      for (const Node* u : x->users) {
        if (u->dead) fail(x, "use list names an erased node");
        --ops[{x, u}];
        visit(u);
      }
      for (const Node* u : x->dim_users()) {
        if (u->dead) fail(x, "dim use list names an erased node");
        --dims[{x, u}];
        visit(u);
      }
    }
    for (const auto& [k, c] : ops)
      if (c) fail(k.second, std::string("use list of operand ") + print_node(p_, k.first) + " is out of sync (" +
                               (c > 0 ? "missing" : "extra") + " entries)");
    for (const auto& [k, c] : dims)
      if (c) fail(k.second, std::string("dim use list of shape dim ") + print_node(p_, k.first) + " is out of sync (" +
                               (c > 0 ? "missing" : "extra") + " entries)");
  }

  const Program& p_;
  VerifyOptions opt_;
  std::unordered_map<const Node*, int> pos_;
};

}  // namespace

void verify(const Program& p, const VerifyOptions& opt) { Verifier(p, opt).run(); }

}  // namespace ember
