#include "core/ir/node.h"

#include <algorithm>
#include <unordered_map>

namespace ember {

namespace {
const OpInfo kOps[] = {
#define OP(name, arity, rule, cost, flags) {#name, arity, DTypeRule::rule, cost, flags},
#include "core/ir/ops.def"
};
}  // namespace

const OpInfo& op_info(Op op) { return kOps[static_cast<int>(op)]; }

const char* reduce_kind_name(ReduceKind k) {
  static const char* n[] = {"sum", "prod", "max", "min", "any", "all", "argmax", "argmin"};
  return n[static_cast<int>(k)];
}
const char* atomic_kind_name(AtomicKind k) {
  static const char* n[] = {"add", "min", "max", "and", "or", "xor", "exchange"};
  return n[static_cast<int>(k)];
}
const char* index_mode_name(IndexMode m) {
  static const char* n[] = {"clamp", "unsafe", "wrap"};
  return n[static_cast<int>(m)];
}

bool Node::inside(const Node* scope) const {
  for (const Node* p = parent; p; p = p->parent)
    if (p == scope) return true;
  return false;
}

Node* Node::enclosing_kernel() const {
  for (Node* p = parent; p; p = p->parent)
    if (p->op == Op::kernel) return p;
  return nullptr;
}

std::vector<Node*> Node::children() const {
  std::vector<Node*> out;
  for (Node* c = first_child; c; c = c->next) out.push_back(c);
  return out;
}

Program::Program() {
  arena_.push_back(std::make_unique<Node>());
  root_ = arena_.back().get();
  root_->op = Op::program;
  root_->id = next_id_++;
}

Node* Program::create(Op op, DType dtype, std::vector<Node*> shape, std::vector<Node*> operands) {
  arena_.push_back(std::make_unique<Node>());
  Node* n = arena_.back().get();
  n->op = op;
  n->dtype = dtype;
  n->shape = std::move(shape);
  n->operands = std::move(operands);
  n->id = next_id_++;
  for (Node* o : n->operands) {
    EMBER_INTERNAL_ASSERT(o != nullptr, "null operand for " << op_name(op));
    o->users.push_back(n);
  }
  return n;
}

void Program::insert_before(Node* pos, Node* n) {
  EMBER_INTERNAL_ASSERT(!n->parent && !n->prev && !n->next, "node is already linked");
  n->parent = pos->parent;
  n->prev = pos->prev;
  n->next = pos;
  if (pos->prev) pos->prev->next = n; else pos->parent->first_child = n;
  pos->prev = n;
}

void Program::insert_after(Node* pos, Node* n) {
  if (pos->next) { insert_before(pos->next, n); return; }
  append(pos->parent, n);
}

void Program::append(Node* scope, Node* n) {
  EMBER_INTERNAL_ASSERT(!n->parent && !n->prev && !n->next, "node is already linked");
  n->parent = scope;
  n->prev = scope->last_child;
  if (scope->last_child) scope->last_child->next = n; else scope->first_child = n;
  scope->last_child = n;
}

void Program::prepend(Node* scope, Node* n) {
  if (scope->first_child) insert_before(scope->first_child, n); else append(scope, n);
}

void Program::unlink(Node* n) {
  if (!n->parent) return;
  if (n->prev) n->prev->next = n->next; else n->parent->first_child = n->next;
  if (n->next) n->next->prev = n->prev; else n->parent->last_child = n->prev;
  n->prev = n->next = n->parent = nullptr;
}

static void drop_use(Node* of, Node* user) {
  auto it = std::find(of->users.begin(), of->users.end(), user);
  EMBER_INTERNAL_ASSERT(it != of->users.end(), "use list out of sync");
  of->users.erase(it);
}

void Program::erase(Node* n) {
  while (n->last_child) erase(n->last_child);
  EMBER_INTERNAL_ASSERT(n->users.empty(), "erasing " << op_name(n->op) << " %" << n->id << " which still has "
                                               << n->users.size() << " users");
  unlink(n);
  for (Node* o : n->operands) drop_use(o, n);
  n->operands.clear();
  n->dead = true;
}

void Program::set_operand(Node* n, int i, Node* v) {
  Node*& slot = n->operands[static_cast<size_t>(i)];
  if (slot == v) return;
  drop_use(slot, n);
  slot = v;
  v->users.push_back(n);
}

void Program::add_operand(Node* n, Node* v) {
  n->operands.push_back(v);
  v->users.push_back(n);
}

void Program::replace_all_uses(Node* old_value, Node* new_value) {
  if (old_value == new_value) return;
  std::vector<Node*> users = old_value->users;
  for (Node* u : users)
    for (size_t i = 0; i < u->operands.size(); ++i)
      if (u->operands[i] == old_value) set_operand(u, static_cast<int>(i), new_value);
}

static void walk(Node* scope, const std::function<void(Node*)>& f) {
  for (Node* c = scope->first_child; c;) {
    Node* next = c->next;
    f(c);
    if (!c->dead && c->first_child) walk(c, f);
    c = next;
  }
}

void Program::for_each(const std::function<void(Node*)>& f) const { walk(root_, f); }

std::vector<Node*> Program::nodes() const {
  std::vector<Node*> out;
  for_each([&](Node* n) { out.push_back(n); });
  return out;
}

std::unique_ptr<Program> clone_program(const Program& src, std::vector<std::pair<const Node*, Node*>>* out_map) {
  auto dst = std::make_unique<Program>();
  dst->name = src.name;
  dst->num_outputs = src.num_outputs;
  dst->next_kernel_id = src.next_kernel_id;
  std::unordered_map<const Node*, Node*> map;
  map[src.root()] = dst->root();
  std::vector<Node*> order = src.nodes();
  // First create every node (operands may refer forward through vars/loops only by order, but
  // shapes and operands always refer to nodes created earlier in program order or to scopes).
  for (Node* n : order) {
    Node* c = dst->create(n->op, n->dtype);
    c->bits = n->bits; c->axis = n->axis; c->kind = n->kind; c->axes = n->axes;
    c->keepdims = n->keepdims; c->mode = n->mode; c->flat = n->flat; c->zero_init = n->zero_init;
    c->index = n->index; c->name = n->name; c->loc = n->loc; c->user_kernel = n->user_kernel;
    c->group = n->group;
    map[n] = c;
  }
  auto m = [&](Node* n) { auto it = map.find(n); EMBER_INTERNAL_ASSERT(it != map.end(), "clone: dangling reference"); return it->second; };
  for (Node* n : order) {
    Node* c = map[n];
    for (Node* d : n->shape) c->shape.push_back(m(d));
    for (Node* o : n->operands) dst->add_operand(c, m(o));
    for (Node* p : n->params) c->params.push_back(m(p));
    for (Node* p : n->memories) c->memories.push_back(m(p));
    dst->append(m(n->parent), c);
  }
  for (Node* a : src.args) dst->args.push_back(a ? m(a) : nullptr);
  for (Node* d : src.dims) dst->dims.push_back(m(d));
  if (out_map)
    for (auto& kv : map) out_map->push_back(kv);
  return dst;
}

}  // namespace ember
