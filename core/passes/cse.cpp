#include "core/passes/cse.h"

#include <unordered_map>
#include <unordered_set>

#include "core/passes/pass_util.h"

namespace ember {

namespace {

size_t hash_node(const Node* n) {
  size_t h = static_cast<size_t>(n->op) * 31u + static_cast<size_t>(n->dtype) * 7u + hash_scalar_attrs(*n);
  for (const Node* o : n->operands) h = (h ^ reinterpret_cast<size_t>(o)) * 1099511628211ull;
  for (const Node* d : n->shape) h = (h ^ reinterpret_cast<size_t>(d)) * 1099511628211ull;
  return h;
}

// A value-numbering key: the node and its hash, computed once per node (a lookup tries every
// open scope's table, and an insert follows).
struct Key {
  const Node* n;
  size_t hash;
  explicit Key(const Node* node) : n(node), hash(hash_node(node)) {}
  bool operator==(const Key& o) const {
    const Node* a = n;
    const Node* b = o.n;
    return hash == o.hash && a->op == b->op && a->dtype == b->dtype && a->shape == b->shape &&
           a->operands == b->operands && same_attrs(*a, *b);
  }
};
struct KeyHash {
  size_t operator()(const Key& k) const { return k.hash; }
};

class Cse {
 public:
  explicit Cse(Program& p) : p_(p) {}
  bool run() {
    std::vector<const Node*> written;
    scope(p_.root(), written);
    return changed_;
  }

 private:
  struct Table {
    std::unordered_map<Key, Node*, KeyHash> values;
    std::unordered_map<const Node*, std::vector<Node*>> loads_of;  // memory -> its loads in `values`
  };

  bool candidate(const Node* n) const {
    if (n->op == Op::load) {
      for (const Node* o : n->operands)
        if (o->op == Op::var) return false;
      return true;
    }
    if (!has_flag(n->op, F_PURE) || n->op == Op::constant) return false;
    for (const Node* o : n->operands)
      if (o->op == Op::var) return false;  // reads a value that changes in program order
    return true;
  }

  // Forgets the loads of memories `mems` in every open scope: by each table's index of loads per
  // memory, so a store costs what it removes, not a scan of the tables (the host level's table
  // holds most of an unrolled program before kernels form).
  void invalidate(const std::unordered_set<const Node*>& mems) {
    for (const Node* m : mems) invalidate(m);
  }
  void invalidate(const Node* mem) {
    for (Table& t : tables_) {
      auto it = t.loads_of.find(mem);
      if (it == t.loads_of.end()) continue;
      for (Node* load : it->second) {
        auto e = t.values.find(Key(load));
        if (e != t.values.end() && e->second == load) t.values.erase(e);
      }
      t.loads_of.erase(it);
    }
  }

  // Numbers the values of scope s; `written` receives the memories s and its sub-scopes write
  // (written_memory, as memory_effects finds them, gathered on the way instead of by a second
  // walk of each scope).
  void scope(Node* s, std::vector<const Node*>& written) {
    tables_.emplace_back();
    for (Node* c = s->first_child; c;) {
      Node* next = c->next;
      if (c->op == Op::loop) {
        // A write anywhere in a loop body is seen by the next iteration's loads.
        std::unordered_set<const Node*> writes;
        memory_effects(c, nullptr, &writes);
        invalidate(writes);
      }
      if (candidate(c)) {
        Node* found = nullptr;
        const Key key(c);
        for (auto t = tables_.rbegin(); t != tables_.rend() && !found; ++t) {
          auto it = t->values.find(key);
          if (it != t->values.end()) found = it->second;
        }
        if (found) {
          p_.replace_all_uses(c, found);  // operands and shapes (a dim's twin takes its place)
          p_.erase(c);
          changed_ = true;
          c = next;
          continue;
        }
        tables_.back().values[key] = c;
        if (c->op == Op::load) tables_.back().loads_of[c->operand(0)].push_back(c);
      }
      if (c->op == Op::store || c->op == Op::atomic) invalidate(c->operand(0));
      if (const Node* m = written_memory(c)) written.push_back(m);
      if (c->is_scope()) {
        std::vector<const Node*> inner;
        scope(c, inner);
        for (const Node* m : inner) invalidate(m);  // (a memory listed twice: the second finds nothing)
        written.insert(written.end(), inner.begin(), inner.end());
      }
      c = next;
    }
    tables_.pop_back();
  }

  Program& p_;
  std::vector<Table> tables_;
  bool changed_ = false;
};

}  // namespace

bool cse(Program& p) { return Cse(p).run(); }

}  // namespace ember
