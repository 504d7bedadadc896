#include "core/passes/apply_schedule.h"

#include <cctype>
#include <functional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/analysis/dependence.h"
#include "core/analysis/explain.h"
#include "core/analysis/schedule_legality.h"
#include "core/ir/builder.h"
#include "core/ir/error.h"
#include "core/ir/shape.h"
#include "core/passes/pass_util.h"

namespace ember {

namespace {

std::string at_line(const Node* n) { return n->loc.known() ? " (line " + std::to_string(n->loc.line) + ")" : ""; }

class Scheduler {
 public:
  explicit Scheduler(Program& p) : p_(p) {
    p_.for_each([&](Node* n) {
      if (n->op != Op::loop || !n->enclosing_kernel()) return;
      std::vector<std::string> names = as_names(n);
      if (!names.empty()) names_[n] = names[0];
    });
  }

  void apply(const std::string& line) {
    std::istringstream in(line);
    std::string op;
    in >> op;
    args_.clear();
    for (std::string a; in >> a;) args_.push_back(a);
    request_ = op + "(";
    for (size_t i = 0; i < args_.size(); ++i) request_ += (i ? ", " : "") + args_[i];
    request_ += ")";
    if (op == "interchange" && args_.size() == 2) {
      // A kernel axis and the loop that is its kernel's body swap too.
      for (int side = 0; side < 2; ++side) {
        const std::string& axis_name = args_[static_cast<size_t>(side)];
        if (has_loop(axis_name)) continue;
        int axis = -1;
        Node* k = kernel_axis(axis_name, &axis);
        if (!k) continue;
        Node* l = loop(args_[static_cast<size_t>(1 - side)]);
        if (l->enclosing_kernel() != k) fail("loop " + names_.at(l) + " is not in the kernel of axis " + axis_name);
        return loop_to_axis(l, axis);
      }
      return interchange(loop(args_[0]), loop(args_[1]));
    }
    if (op == "tile" && args_.size() == 2) return tile(loop(args_[0]), number(args_[1]));
    if (op == "parallelize" && args_.size() == 1) return loop_to_axis(loop(args_[0]), -1);
    if (op == "fuse" && args_.size() == 2) return fuse(kernel(args_[0]), kernel(args_[1]));
    fail("not a schedule request (interchange A B, tile A T, parallelize A, fuse K1 K2)");
  }

 private:
  [[noreturn]] void fail(const std::string& why) const { throw CompileError("schedule " + request_ + ": " + why); }

  long number(const std::string& s) const {
    try {
      size_t used = 0;
      long v = std::stol(s, &used);
      if (used == s.size()) return v;
    } catch (const std::exception&) {}
    fail("'" + s + "' is not a whole number");
  }

  int kernel_number(const Node* k) const {
    int i = 0, found = -1;
    p_.for_each([&](Node* n) {
      if (n->op != Op::kernel) return;
      if (n == k) found = i;
      ++i;
    });
    return found;
  }
  std::string kernel_text(const Node* k) const { return "kernel " + std::to_string(kernel_number(k)); }

  // The in-kernel loop the user named `name`.
  Node* loop(const std::string& name) const {
    std::vector<Node*> found;
    std::string known;
    p_.for_each([&](Node* n) {
      auto it = names_.find(n);
      if (it == names_.end() || n->dead) return;
      if (it->second == name) found.push_back(n);
      known += (known.empty() ? "" : ", ") + it->second + at_line(n);
    });
    if (found.size() == 1) return found[0];
    if (found.empty())
      fail("no loop inside a kernel is named '" + name + "' (loops are named by `with em.loop(...) as " + name +
           ":`; " + (known.empty() ? "this program has none" : "this program's: " + known) + ")");
    std::string lines;
    for (const Node* n : found) lines += (lines.empty() ? "" : ",") + at_line(n);
    fail("'" + name + "' names " + std::to_string(found.size()) + " loops" + lines + "; give them different names");
  }

  bool has_loop(const std::string& name) const {
    for (const auto& [n, nm] : names_)
      if (nm == name && !n->dead) return true;
    return false;
  }

  // The kernel with an axis the user named `name` (its `as (i, j)` line), and the axis; null if none.
  Node* kernel_axis(const std::string& name, int* axis) const {
    std::vector<std::pair<Node*, int>> found;
    p_.for_each([&](Node* n) {
      if (n->op != Op::kernel) return;
      std::vector<std::string> names = as_names(n);
      if (static_cast<int>(names.size()) != n->rank()) return;
      for (int a = 0; a < n->rank(); ++a)
        if (names[static_cast<size_t>(a)] == name) found.emplace_back(n, a);
    });
    if (found.size() > 1) fail("'" + name + "' names an axis of " + std::to_string(found.size()) + " kernels");
    if (found.empty()) return nullptr;
    *axis = found[0].second;
    return found[0].first;
  }

  // The kernel the user named: its number in program order, or a name of its axes.
  Node* kernel(const std::string& ref) const {
    std::vector<Node*> kernels, named;
    p_.for_each([&](Node* n) {
      if (n->op != Op::kernel) return;
      kernels.push_back(n);
      for (const std::string& a : as_names(n))
        if (a == ref) named.push_back(n);
    });
    if (!ref.empty() && (std::isdigit(static_cast<unsigned char>(ref[0])) != 0)) {
      long k = number(ref);
      if (k < 0 || k >= static_cast<long>(kernels.size()))
        fail("there is no kernel " + ref + " (the program has " + std::to_string(kernels.size()) + " here)");
      return kernels[static_cast<size_t>(k)];
    }
    if (named.size() == 1) return named[0];
    if (named.empty()) fail("no kernel has an axis named '" + ref + "' (`with em.kernel(...) as (" + ref + ", ...):`)");
    fail("'" + ref + "' names an axis of " + std::to_string(named.size()) + " kernels; name them by number");
  }

  [[noreturn]] void broken(const DepWhy& why, const Node* k, const std::string& where) const {
    const std::string who = kernel_text(k);
    fail("it would break a dependence: " + dependence_text(why, who, who, where));
  }

  // Loops of `l`'s body may jump out of l (break/continue bound to it).
  void no_jumps(const Node* l) const {
    walk_subtree(const_cast<Node*>(l), [&](Node* n) {
      if (n->op != Op::break_ && n->op != Op::continue_) return;
      const Node* target = n->parent;
      while (target && target->op != Op::loop) target = target->parent;
      if (target == l) fail("loop " + names_.at(l) + " has a break or continue" + at_line(n));
    });
  }

  void interchange(Node* a, Node* b) {
    if (a == b) fail("a loop cannot be swapped with itself");
    if (a->parent == b) std::swap(a, b);
    if (b->parent != a)
      fail("loop " + names_.at(b) + " is not directly inside loop " + names_.at(a) +
           " (only loops nested one in the "
           "other swap)");
    for (const Node* c = a->first_child; c; c = c->next)
      if (c != b && !has_flag(c->op, F_PURE))
        fail("loop " + names_.at(a) + " runs more than loop " + names_.at(b) + " (a " + op_name(c->op) + at_line(c) +
             "); only perfectly nested loops swap");
    // b's bounds may be computed in a's body (host math traced there) but not from a's counter.
    std::unordered_set<const Node*> bounds;
    std::function<bool(const Node*)> free_of_a = [&](const Node* o) {
      if (o == a) return false;
      if (!o->inside(a) || !bounds.insert(o).second) return true;
      for (const Node* x : o->operands)
        if (!free_of_a(x)) return false;
      return true;
    };
    for (int i = 0; i < 3; ++i)
      if (!free_of_a(b->operand(i))) fail("the bounds of loop " + names_.at(b) + " depend on loop " + names_.at(a));
    no_jumps(a);
    no_jumps(b);
    Node* k = a->enclosing_kernel();
    DepWhy why;
    if (!interchange_keeps_dependences(da_, k, a, b, &why))
      broken(why, k, "in an earlier iteration of " + names_.at(a) + " and a later one of " + names_.at(b));
    // a{pre..., b{body}} -> b{a{pre..., body}}: each counter stays its own node; b's bounds go first.
    for (Node* c = a->first_child; c;) {
      Node* next = c->next;
      if (bounds.count(c)) {
        p_.unlink(c);
        p_.insert_before(a, c);
      }
      c = next;
    }
    while (Node* c = b->first_child) {
      p_.unlink(c);
      p_.append(a, c);
    }
    p_.unlink(b);
    p_.insert_before(a, b);
    p_.unlink(a);
    p_.append(b, a);
  }

  void tile(Node* l, long size) {
    const Node* s = l->operand(2);
    if (size < 2 || size > (1L << 24)) fail("the tile size must be from 2 to 2^24");
    if (s->op != Op::constant || s->i() <= 0) fail("loop " + names_.at(l) + " needs a constant positive step");
    Builder b(p_);
    b.loc = l->loc;
    b.set_insert_before(l);
    Node* step = b.i32(static_cast<int32_t>(s->i() * size));
    b.set_insert_before(l);
    Node* t = b.loop(l->operand(0), l->operand(1), step, l->shape);
    b.set_insert_end(t);
    Node* end = b.binary(Op::min, b.binary(Op::add, t, step), l->operand(1));
    p_.unlink(l);
    p_.append(t, l);
    p_.set_operand(l, 0, t);
    p_.set_operand(l, 1, end);
    names_[t] = names_.at(l) + "_tile";
  }

  // parallelize (axis -1): loop l, its kernel's body, becomes a new last axis. interchange with
  // kernel axis `axis`: l's iterations become that axis's threads and l loops over the axis's
  // old range (counter = the old coordinate).
  void loop_to_axis(Node* l, int axis) {
    Node* k = l->enclosing_kernel();
    const std::string& name = names_.at(l);
    if (l->parent != k)
      fail("loop " + name + " is inside another loop; a loop becomes a kernel axis only when it is its kernel's body");
    for (const Node* c = k->first_child; c; c = c->next)
      if (c != l && !has_flag(c->op, F_PURE))
        fail(kernel_text(k) + " runs more than loop " + name + " (a " + op_name(c->op) + at_line(c) +
             "); a loop becomes a kernel axis only when it is its kernel's body");
    if (!k->group.empty()) fail(kernel_text(k) + " has workgroups");
    Node* begin = l->operand(0);
    Node* end = l->operand(1);
    const Node* s = l->operand(2);
    if (s->op != Op::constant || s->i() <= 0) fail("loop " + name + " needs a constant positive step");
    if (begin->inside(k) || end->inside(k)) fail("the bounds of loop " + name + " differ between threads");
    no_jumps(l);
    DepWhy why;
    if (!iterations_independent(da_, k, l, &why)) broken(why, k, "in an earlier iteration of " + name);
    const long step = s->i();
    Builder b(p_);
    b.loc = l->loc;
    b.set_insert_before(k);
    Node* trips;
    if (begin->op == Op::constant && end->op == Op::constant) {
      const long n = (static_cast<long>(end->i()) - begin->i() + step - 1) / step;
      if (n < 1) fail("loop " + name + " runs no iteration");
      trips = b.i32(static_cast<int32_t>(n));
    } else if (begin->op == Op::constant && begin->i() == 0 && step == 1) {
      trips = end;
    } else {
      b.set_insert_before(k);
      Node* span = b.binary(Op::add, b.binary(Op::sub, end, begin), b.i32(static_cast<int32_t>(step - 1)));
      trips = b.binary(Op::max, b.binary(Op::div, span, b.i32(static_cast<int32_t>(step))), b.i32(0));
    }
    const std::vector<Node*> old_shape(k->shape.begin(), k->shape.end());
    std::vector<Node*> shape = old_shape;
    std::vector<Node*> old_index;  // the swapped axis's coordinate: l's counter from now on
    if (axis < 0) {
      shape.push_back(trips);
    } else {
      shape[static_cast<size_t>(axis)] = trips;
      walk_subtree(k, [&](Node* n) {
        if (n->op == Op::index && n->axis == axis) old_index.push_back(n);
      });
      // Everything else in k is pure: it runs in each iteration of l now (it may read the axis).
      Node* anchor = l->first_child;
      for (Node* c = k->first_child; c;) {
        Node* next = c->next;
        if (c != l) {
          p_.unlink(c);
          if (anchor)
            p_.insert_before(anchor, c);
          else
            p_.append(l, c);
        }
        c = next;
      }
    }
    walk_subtree(k, [&](Node* n) {
      if (n == k || same_shape(n->shape, old_shape)) p_.set_shape(n, shape);
    });
    // A fresh coordinate node (value numbering would hand back an old one of this axis).
    Node* idx = p_.create(Op::index, DType::i32, shape);
    idx->axis = axis < 0 ? static_cast<int>(old_shape.size()) : axis;
    idx->loc = l->loc;
    p_.prepend(k, idx);
    b.set_insert_before(idx->next);
    Node* counter = idx;
    if (step != 1) counter = b.binary(Op::mul, counter, b.i32(static_cast<int32_t>(step)));
    if (!(begin->op == Op::constant && begin->i() == 0)) counter = b.binary(Op::add, counter, begin);
    p_.replace_all_uses(l, counter);
    if (axis >= 0) {  // l now runs over the axis's old range
      for (Node* n : old_index) {
        p_.replace_all_uses(n, l);
        p_.erase(n);
      }
      p_.set_operand(l, 0, b.i32(0));
      p_.set_operand(l, 1, old_shape[static_cast<size_t>(axis)]);
      p_.set_operand(l, 2, b.i32(1));
      return;
    }
    while (Node* c = l->first_child) {
      p_.unlink(c);
      p_.insert_before(l, c);
    }
    names_.erase(l);
    p_.erase(l);
  }

  void fuse(Node* a, Node* b) {
    if (a == b) return;  // already one kernel
    if (b->parent == a->parent && b->order < a->order) std::swap(a, b);
    if (a->parent != b->parent) fail(kernel_text(a) + " and " + kernel_text(b) + " are in different host scopes");
    if (!same_shape(a->shape, b->shape)) fail(kernel_text(a) + " and " + kernel_text(b) + " have different shapes");
    if (!a->group.empty() || !b->group.empty()) fail("kernels with workgroups do not fuse");
    std::vector<Node*> between;
    for (Node* c = a->next; c != b; c = c->next) {
      if (c->op == Op::buffer || (has_flag(c->op, F_PURE) && c->shape.empty())) {
        between.push_back(c);
        continue;
      }
      fail(kernel_text(a) + " and " + kernel_text(b) + " are not adjacent: the host runs " +
           (c->op == Op::kernel ? kernel_text(c) : std::string("a ") + op_name(c->op)) + at_line(c) + " between them");
    }
    AccessGroup ga(a->shape, a->rank()), gb(b->shape, b->rank());
    ga.add(a);
    gb.add(b);
    DepWhy why;
    if (!da_.within_thread(ga, gb, DepPairs::all, &why))
      fail("it would break a dependence: " + dependence_text(why, kernel_text(a), kernel_text(b), "at another thread"));
    for (Node* c : between) {
      p_.unlink(c);
      p_.insert_before(a, c);
    }
    // Its index nodes read the same coordinates in a (cse merges the copies).
    while (Node* c = b->first_child) {
      p_.unlink(c);
      p_.append(a, c);
    }
    p_.erase(b);
  }

  Program& p_;
  DependenceAnalysis da_;
  std::unordered_map<const Node*, std::string> names_;
  std::vector<std::string> args_;
  std::string request_;
};

}  // namespace

bool apply_schedule(Program& p) {
  if (p.schedule.empty()) return false;
  Scheduler s(p);
  std::istringstream in(p.schedule);
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(" \t") != std::string::npos) s.apply(line);
  return true;
}

}  // namespace ember
