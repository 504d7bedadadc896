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

bool same_value(const Node* a, const Node* b) {
  return a->op == b->op && a->dtype == b->dtype && a->shape == b->shape && a->operands == b->operands &&
         same_attrs(*a, *b);
}

// The values of every open scope in one open-addressing table (linear probing, tombstones):
// a scope's entries are removed when it closes (an undo log), so a lookup sees exactly the open
// scopes, and at most one entry per value (an insert follows a lookup that found none). One flat
// array instead of a hash map per scope: no allocation per value, and a lookup reads one or two
// cache lines (issue 17: cse was ~160 ns per node on the 400-step stencil).
class ValueTable {
 public:
  struct Entry {
    size_t hash = 0;
    Node* n = nullptr;  // in a slot: null never used, tombstone() removed
  };
  ValueTable() { slots_.resize(kInitial); }

  Node* find(const Node* n, size_t hash) const {
    for (size_t i = home(hash); ; i = (i + 1) & mask()) {
      const Entry& s = slots_[i];
      if (!s.n) return nullptr;
      if (s.n != tombstone() && s.hash == hash && same_value(s.n, n)) return s.n;
    }
  }
  // n's value is not in the table (find returned null).
  void insert(Node* n, size_t hash) {
    if ((used_ + 1) * 2 > slots_.size()) rehash();
    size_t i = home(hash);
    while (slots_[i].n && slots_[i].n != tombstone()) i = (i + 1) & mask();
    if (!slots_[i].n) ++used_;
    slots_[i] = {hash, n};
    log_.push_back({hash, n});
  }
  // Removes n if it is still there (a scope's close removes what invalidation left).
  void remove(const Node* n, size_t hash) {
    for (size_t i = home(hash); slots_[i].n; i = (i + 1) & mask())
      if (slots_[i].n == n) { slots_[i].n = tombstone(); return; }
  }
  void open_scope() { marks_.push_back(log_.size()); }
  void close_scope() {
    for (size_t k = marks_.back(); k < log_.size(); ++k) remove(log_[k].n, log_[k].hash);
    log_.resize(marks_.back());
    marks_.pop_back();
  }

 private:
  static constexpr size_t kInitial = 1024;
  static Node* tombstone() { return reinterpret_cast<Node*>(alignof(Node)); }
  size_t mask() const { return slots_.size() - 1; }
  // hash_node's low bits are weak (nodes are 64-byte aligned): the slot comes from its high bits.
  size_t home(size_t hash) const { return ((hash ^ (hash >> 29)) * 0xbf58476d1ce4e5b9ull >> 32) & mask(); }
  // Drops the tombstones; doubles when the live entries fill a quarter or more.
  void rehash() {
    std::vector<Entry> old;
    old.swap(slots_);
    size_t live = 0;
    for (const Entry& s : old) live += s.n && s.n != tombstone();
    slots_.assign(live * 4 >= old.size() ? old.size() * 2 : old.size(), Entry{});
    used_ = 0;
    for (const Entry& s : old) {
      if (!s.n || s.n == tombstone()) continue;
      size_t i = home(s.hash);
      while (slots_[i].n) i = (i + 1) & mask();
      slots_[i] = s;
      ++used_;
    }
  }
  std::vector<Entry> slots_;
  size_t used_ = 0;             // slots not empty (live or tombstone)
  std::vector<Entry> log_;      // entries in insertion order
  std::vector<size_t> marks_;   // log_ size at each open scope's start
};

class Cse {
 public:
  Cse(Program& p, Resimplify* resimplify) : p_(p), resimplify_(resimplify), visits_(node_visit_counter()) {}
  bool run() {
    if (p_.walks_by_array()) {
      walk_array();
    } else {
      std::vector<const Node*> written;
      scope(p_.root(), written);
    }
    return changed_;
  }

 private:
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

  // Forgets the loads of memories `mems` in every open scope: by the index of loads per memory,
  // so a store costs what it removes, not a scan of the table (the host level holds most of an
  // unrolled program before kernels form).
  void invalidate(const std::unordered_set<const Node*>& mems) {
    for (const Node* m : mems) invalidate(m);
  }
  void invalidate(const Node* mem) {
    auto it = loads_of_.find(mem);
    if (it == loads_of_.end()) return;
    for (const ValueTable::Entry& l : it->second) values_.remove(l.n, l.hash);
    loads_of_.erase(it);
  }

  // Numbers the values of scope s; `written` receives the memories s and its sub-scopes write
  // (written_memory, as memory_effects finds them, gathered on the way instead of by a second
  // walk of each scope).
  void scope(Node* s, std::vector<const Node*>& written) {
    values_.open_scope();
    for (Node* c = s->first_child; c;) {
      ++visits_;  // (as for_each counts them in walk_array)
      Node* next = c->next;
      prefetch_node(next);
      if (visit(c, written) && c->is_scope()) {
        std::vector<const Node*> inner;
        scope(c, inner);
        close(inner, written);
      }
      c = next;
    }
    values_.close_scope();
  }

  // The same numbering over Program::for_each, for a program it walks as an array (cse links
  // nothing, so the array holds to the end): the open scopes on a stack instead of the recursion.
  void walk_array() {
    struct Open {
      Node* scope;
      std::vector<const Node*> written;
    };
    std::vector<Open> open;
    open.push_back({p_.root(), {}});
    values_.open_scope();
    auto close_innermost = [&] {
      Open done = std::move(open.back());
      open.pop_back();
      values_.close_scope();
      close(done.written, open.back().written);
    };
    p_.for_each([&](Node* c) {
      while (open.back().scope != c->parent) close_innermost();
      if (visit(c, open.back().written) && c->is_scope()) {
        open.push_back({c, {}});
        values_.open_scope();
      }
    });
    while (open.size() > 1) close_innermost();
    values_.close_scope();
  }

  // Numbers c in the innermost open scope, whose writes `written` gathers. False if c was merged
  // into its twin (and erased).
  bool visit(Node* c, std::vector<const Node*>& written) {
    if (c->op == Op::loop) {
      // A write anywhere in a loop body is seen by the next iteration's loads.
      std::unordered_set<const Node*> writes;
      memory_effects(c, nullptr, &writes);
      invalidate(writes);
    }
    if (candidate(c)) {
      const size_t hash = hash_node(c);
      if (Node* found = values_.find(c, hash)) {
        if (resimplify_) note(c);
        p_.replace_all_uses(c, found);  // operands and shapes (a dim's twin takes its place)
        p_.erase(c);
        changed_ = true;
        return false;
      }
      values_.insert(c, hash);
      // (a load of a closed scope stays listed; removing it again finds nothing)
      if (c->op == Op::load) loads_of_[c->operand(0)].push_back({hash, c});
    }
    if (c->op == Op::store || c->op == Op::atomic) invalidate(c->operand(0));
    if (const Node* m = written_memory(c)) written.push_back(m);
    return true;
  }

  // After a closed scope (its values already out of the table): the loads of what it wrote are
  // forgotten in the scopes around it, which write it too.
  void close(const std::vector<const Node*>& inner, std::vector<const Node*>& written) {
    for (const Node* m : inner) invalidate(m);  // (a memory listed twice: the second finds nothing)
    written.insert(written.end(), inner.begin(), inner.end());
  }

  // c's users get its twin as operand, and its operands lose c's use.
  void note(const Node* c) {
    if (!c->dim_users().empty()) resimplify_->all = true;  // shapes change: same_as compares them
    resimplify_->nodes.insert(resimplify_->nodes.end(), c->users.begin(), c->users.end());
    resimplify_->lost.insert(resimplify_->lost.end(), c->operands.begin(), c->operands.end());
  }

  Program& p_;
  Resimplify* resimplify_;
  uint64_t& visits_;  // node_visit_counter()
  ValueTable values_;
  std::unordered_map<const Node*, std::vector<ValueTable::Entry>> loads_of_;  // memory -> its loads in values_
  bool changed_ = false;
};

}  // namespace

bool cse(Program& p) { return Cse(p, nullptr).run(); }
bool cse(Program& p, Resimplify* resimplify) { return Cse(p, resimplify).run(); }

}  // namespace ember
