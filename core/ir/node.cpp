#include "core/ir/node.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <type_traits>
#include <unordered_map>

#ifdef __linux__
#include <sys/mman.h>
#endif

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

// ---- Attributes, derived from EMBER_NODE_ATTRS ----

namespace {
size_t hash_value(const ThinString& v) { return std::hash<std::string>()(v.str()); }
size_t hash_value(const ThinVec<int>& v) {
  size_t h = v.size();
  for (int x : v) h = (h ^ static_cast<size_t>(static_cast<uint32_t>(x))) * 1099511628211ull;
  return h;
}
template <class T>
size_t hash_value(const T& v) {
  static_assert(std::is_integral_v<T> || std::is_enum_v<T>, "hash_attrs: add a hash_value overload for this type");
  if constexpr (std::is_enum_v<T>) return static_cast<size_t>(static_cast<std::underlying_type_t<T>>(v));
  else return static_cast<size_t>(v);
}

// Per-attribute steps; metadata attributes are neither compared nor hashed (templates, so the
// metadata branch does not need operator== or a hash for its type).
template <AttrRole R, class T>
bool attr_equal(const T& a, const T& b) {
  if constexpr (R == AttrRole::semantic) return a == b;
  else return true;
}
template <AttrRole R, class T>
void attr_hash(size_t& h, const T& v) {
  if constexpr (R == AttrRole::semantic) h = (h ^ hash_value(v)) * 1099511628211ull;
}
}  // namespace

void copy_attrs(NodeAttrs& dst, const NodeAttrs& src) {
#define EMBER_COPY_ATTR(type, name, init, role) dst.name = src.name;
  EMBER_NODE_ATTRS(EMBER_COPY_ATTR)
#undef EMBER_COPY_ATTR
}

bool same_attrs(const NodeAttrs& a, const NodeAttrs& b) {
#define EMBER_SAME_ATTR(type, name, init, role) \
  if (!attr_equal<AttrRole::role>(a.name, b.name)) return false;
  EMBER_NODE_ATTRS(EMBER_SAME_ATTR)
#undef EMBER_SAME_ATTR
  return true;
}

namespace {
// hash_attrs over every semantic attribute, or over the integer and enum ones only.
template <bool ScalarsOnly>
size_t hash_attrs_of(const NodeAttrs& a) {
  size_t h = 0x9e3779b97f4a7c15ull;
#define EMBER_HASH_ATTR(type, name, init, role)                                     \
  if constexpr (!ScalarsOnly || std::is_integral_v<type> || std::is_enum_v<type>) \
    attr_hash<AttrRole::role>(h, a.name);
  EMBER_NODE_ATTRS(EMBER_HASH_ATTR)
#undef EMBER_HASH_ATTR
  return h;
}
}  // namespace

size_t hash_attrs(const NodeAttrs& a) { return hash_attrs_of<false>(a); }
size_t hash_scalar_attrs(const NodeAttrs& a) { return hash_attrs_of<true>(a); }

std::vector<const char*> non_default_attrs(const NodeAttrs& a) {
  static const NodeAttrs defaults;
  std::vector<const char*> out;
#define EMBER_NON_DEFAULT_ATTR(type, name, init, role) \
  if (AttrRole::role == AttrRole::semantic && !attr_equal<AttrRole::role>(a.name, defaults.name)) out.push_back(#name);
  EMBER_NODE_ATTRS(EMBER_NON_DEFAULT_ATTR)
#undef EMBER_NON_DEFAULT_ATTR
  return out;
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
  root_ = allocate();
  root_->op = Op::program;
  root_->id = next_id_++;
}

namespace {
constexpr size_t kHugePage = size_t{2} << 20;
}  // namespace

Program::Slab::Slab(size_t n, bool huge) : capacity(n) {
  const size_t bytes = n * sizeof(Node);
  void* mem = nullptr;
  if (huge) {
    const size_t whole = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    mem = std::aligned_alloc(kHugePage, whole);
#ifdef __linux__
    // A hint for the whole aligned range (a huge page needs all of it): without, plain pages.
    if (mem) madvise(mem, whole, MADV_HUGEPAGE);
#endif
  }
  if (!mem) mem = std::aligned_alloc(alignof(Node), bytes);  // (sizeof(Node) is a multiple of its alignment)
  if (!mem) throw std::bad_alloc();
  nodes = static_cast<Node*>(mem);
}

Program::Slab::~Slab() {
  for (size_t i = 0; i < used; ++i) nodes[i].~Node();
  std::free(nodes);
}

Node* Program::allocate() {
  if (slabs_.empty() || slabs_.back().used == slabs_.back().capacity) {
    const bool huge = slabs_.size() >= kSmallSlabs;
    slabs_.emplace_back(huge ? kHugePage / sizeof(Node) : kSmallSlabNodes, huge);
  }
  Slab& s = slabs_.back();
  return new (s.nodes + s.used++) Node();
}

Node* Program::create(Op op, DType dtype, std::span<Node* const> shape, std::span<Node* const> operands) {
  Node* n = allocate();
  n->op = op;
  n->dtype = dtype;
  n->operands.assign(operands.begin(), operands.end());
  n->id = next_id_++;
  n->use_slots.resize(n->operands.size());
  for (size_t i = 0; i < n->operands.size(); ++i) {
    EMBER_INTERNAL_ASSERT(n->operands[i] != nullptr, "null operand for " << op_name(op));
    add_use(n, i);
  }
  set_shape(n, shape);
  return n;
}

// Order labels: appended nodes step by kOrderGap; an insertion takes the midpoint of its
// neighbours, and when they have no room left the scope is relabelled (amortized: each relabel
// leaves ~32 halvings of room at every position).
static constexpr uint64_t kOrderGap = uint64_t{1} << 32;

void Program::relabel(Node* scope) {
  uint64_t count = 0;
  for (Node* c = scope->first_child; c; c = c->next) ++count;
  const uint64_t step = std::min<uint64_t>(kOrderGap, ~uint64_t{0} / (count + 2));
  uint64_t at = 0;
  for (Node* c = scope->first_child; c; c = c->next) c->order = at += step;
}

void Program::insert_before(Node* pos, Node* n) {
  EMBER_INTERNAL_ASSERT(!n->parent && !n->prev && !n->next, "node is already linked");
  links_changed();
  uint64_t lo = pos->prev ? pos->prev->order : 0;
  if (pos->order - lo < 2) {
    relabel(pos->parent);
    lo = pos->prev ? pos->prev->order : 0;
  }
  n->order = lo + (pos->order - lo) / 2;
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
  links_changed();
  if (scope->last_child && scope->last_child->order > ~uint64_t{0} - kOrderGap) relabel(scope);
  n->order = (scope->last_child ? scope->last_child->order : 0) + kOrderGap;
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
  links_changed();
  detach(n);
}

void Program::detach(Node* n) {
  if (!n->parent) return;
  if (n->prev) n->prev->next = n->next; else n->parent->first_child = n->next;
  if (n->next) n->next->prev = n->prev; else n->parent->last_child = n->prev;
  n->prev = n->next = n->parent = nullptr;
}

// Appends n's use of operands[i] to that operand's users, remembering the slot.
void Program::add_use(Node* n, size_t i) {
  Node* o = n->operands[i];
  n->use_slots[i] = static_cast<uint32_t>(o->users.size());
  o->users.push_back(n);
}

// Removes n's use of operands[i] from that operand's users: the list's last entry moves into the
// hole and its owner's slot is updated (every other use of n is live, so no stale slot matches).
void Program::drop_use(Node* n, size_t i) {
  Node* o = n->operands[i];
  auto& list = o->users;
  const uint32_t slot = n->use_slots[i];
  EMBER_INTERNAL_ASSERT(slot < list.size() && list[slot] == n, "use list out of sync");
  const uint32_t last = static_cast<uint32_t>(list.size() - 1);
  Node* moved = list[last];
  list[slot] = moved;
  list.pop_back();
  if (slot == last) return;
  for (size_t j = 0; j < moved->operands.size(); ++j)
    if (moved->operands[j] == o && moved->use_slots[j] == last) {
      moved->use_slots[j] = slot;
      if (j) node_visit_counter() += j;  // (the operands passed over)
      return;
    }
  EMBER_INTERNAL_ASSERT(false, "use list out of sync");
}

void Program::truncate_operands(Node* n, size_t count) {
  while (n->operands.size() > count) {
    drop_use(n, n->operands.size() - 1);
    n->operands.pop_back();
    n->use_slots.pop_back();
  }
}


void Program::erase(Node* n) {
  while (n->last_child) erase(n->last_child);
  EMBER_INTERNAL_ASSERT(n->users.empty(), "erasing " << op_name(n->op) << " %" << n->id << " which still has "
                                               << n->users.size() << " users");
  EMBER_INTERNAL_ASSERT(n->dim_users().empty(), "erasing " << op_name(n->op) << " %" << n->id
                                                   << " which is still a dim of " << n->dim_users().size() << " nodes");
  detach(n);
  truncate_operands(n, 0);
  if (!n->dead) drop_dim_uses(n);
  n->dead = true;
  // Give the emptied lists' storage back (erased nodes stay allocated until the program goes;
  // their shape stays readable).
  n->operands.release();
  n->use_slots.release();
  n->users.release();
  n->release_dim_users();
}

void Program::set_shape(Node* n, std::span<Node* const> view) {
  EMBER_INTERNAL_ASSERT(!n->dead, "set_shape of an erased node");
  SmallVec<Node*, 4> shape;  // a copy: the view may be n's own shape
  shape.assign(view.begin(), view.end());
  for (Node* d : shape) EMBER_INTERNAL_ASSERT(d != nullptr, "null dim for " << op_name(n->op));
  drop_dim_uses(n);
  n->shape.v_.assign(shape.begin(), shape.end());
  n->shape_slots.resize(n->shape.v_.size());
  for (size_t a = 0; a < n->shape.v_.size(); ++a) {
    Node* d = n->shape.v_[a];
    n->shape_slots[a] = static_cast<uint32_t>(d->dim_users().size());
    d->dim_users_mut().push_back(n);
  }
}

// Removes n's entries from its dims' dim_users: each by its slot, the list's last entry moved
// into the hole (its owner's slot updated), so erasing is O(rank), not O(uses of the dim).
void Program::drop_dim_uses(Node* n) {
  for (size_t a = 0; a < n->shape.v_.size(); ++a) {
    Node* d = n->shape.v_[a];
    ThinVec<Node*>& list = d->dim_users_mut();
    const uint32_t slot = n->shape_slots[a];
    EMBER_INTERNAL_ASSERT(slot < list.size() && list[slot] == n, "dim use list out of sync");
    const uint32_t last = static_cast<uint32_t>(list.size() - 1);
    Node* moved = list[last];
    list[slot] = moved;
    list.pop_back();
    if (slot == last) continue;
    // When the moved entry is n's own (a shape such as [N, N, N]), only n's entries after `a` are
    // live: the slots of those dropped already are stale and may equal `last`.
    for (size_t b = moved == n ? a + 1 : 0; b < moved->shape.v_.size(); ++b)
      if (moved->shape.v_[b] == d && moved->shape_slots[b] == last) {
        moved->shape_slots[b] = slot;
        break;
      }
  }
}

void Program::set_operand(Node* n, int i, Node* v) {
  const size_t k = static_cast<size_t>(i);
  if (n->operands[k] == v) return;
  drop_use(n, k);
  n->operands[k] = v;
  add_use(n, k);
}

void Program::add_operand(Node* n, Node* v) {
  n->operands.push_back(v);
  n->use_slots.push_back(0);
  add_use(n, n->operands.size() - 1);
}

void Program::replace_all_uses(Node* old_value, Node* new_value) {
  if (old_value == new_value) return;
  std::vector<Node*> users = old_value->users;
  for (Node* u : users)
    for (size_t i = 0; i < u->operands.size(); ++i)
      if (u->operands[i] == old_value) set_operand(u, static_cast<int>(i), new_value);
  std::vector<Node*> dim_users = old_value->dim_users();
  std::sort(dim_users.begin(), dim_users.end(), [](const Node* a, const Node* b) { return a->id < b->id; });
  dim_users.erase(std::unique(dim_users.begin(), dim_users.end()), dim_users.end());
  for (Node* u : dim_users) {
    std::vector<Node*> s = u->shape;
    std::replace(s.begin(), s.end(), old_value, new_value);
    set_shape(u, std::move(s));
  }
}

uint64_t& node_visit_counter() {
  static thread_local uint64_t visits = 0;
  return visits;
}

namespace {

// The order a walk by links visited, for Program's walk cache; `complete` turns false if the walk
// met a dead node (f erased the next sibling: the walk stopped short there, so `order` is not the
// program).
struct Recording {
  std::vector<Node*>& order;
  bool complete = true;
};

// The siblings from `c` on, and what is inside them, by links, appending to `rec` if given. A
// node's `next` is read before f sees the node: what f links right after it is not visited.
void walk_links(Node* c, const std::function<void(Node*)>& f, uint64_t& visits, Recording* rec = nullptr) {
  while (c) {
    ++visits;
    Node* next = c->next;
    prefetch_node(next);
    if (rec) {
      rec->complete = rec->complete && !c->dead;
      rec->order.push_back(c);
    }
    f(c);
    if (!c->dead && c->first_child) walk_links(c->first_child, f, visits, rec);
    c = next;
  }
}

}  // namespace

void Program::set_walk_cache(bool on, uint64_t min_nodes) const {
  walk_cache_on_ = on;
  walk_min_nodes_ = min_nodes;
  walk_order_valid_ = false;
  walk_size_ = 0;
  if (!on) walk_order_ = {};
}

void Program::for_each(const std::function<void(Node*)>& f) const {
  uint64_t& visits = node_visit_counter();
  if (!walk_cache_on_ || walking_) {  // (a walk inside f goes by links: the array is the outer walk's)
    walk_links(root_->first_child, f, visits);
    return;
  }
  struct Depth {
    int& d;
    explicit Depth(int& x) : d(x) { ++d; }
    ~Depth() { --d; }
  } depth(walking_);
  if (walk_order_valid_) {
    walk_cached(f, visits);
    return;
  }
  const uint64_t v0 = visits;
  if (walk_size_ < walk_min_nodes_) {
    walk_links(root_->first_child, f, visits);
    walk_size_ = visits - v0;
    return;
  }
  // Record the order. It holds if nothing was linked or unlinked during the walk (erased nodes
  // are dead: later walks skip them).
  walk_order_.clear();
  walk_order_valid_ = true;
  Recording rec{walk_order_};
  walk_links(root_->first_child, f, visits, &rec);
  walk_order_valid_ = walk_order_valid_ && rec.complete;
  walk_size_ = visits - v0;
}

// walk_links' visits, in its order, from the array: until f links or unlinks a node, the array is
// the program's order (it was when the walk began, and erasing keeps it). From then on the walk
// goes by links from where walk_links would be: the current node's children and saved next, then
// each enclosing scope's saved next (`open`: the scopes around the current node, each with the
// `next` it had when visited).
void Program::walk_cached(const std::function<void(Node*)>& f, uint64_t& visits) const {
  constexpr size_t kAhead = 8;  // nodes prefetched ahead of the one visited
  struct Open {
    Node* scope;
    Node* next;
  };
  std::vector<Open> open;
  const std::vector<Node*>& order = walk_order_;  // (f's own walks go by links: it stays as it is)
  for (size_t i = 0; i < order.size(); ++i) {
    if (i + kAhead < order.size()) prefetch_node(order[i + kAhead]);
    Node* c = order[i];
    if (c->dead) continue;
    while (!open.empty() && open.back().scope != c->parent) open.pop_back();
    ++visits;
    Node* next = c->next;
    f(c);
    if (!walk_order_valid_) {
      if (!c->dead && c->first_child) walk_links(c->first_child, f, visits);
      walk_links(next, f, visits);
      for (size_t k = open.size(); k-- > 0;) walk_links(open[k].next, f, visits);
      return;
    }
    if (!c->dead && c->first_child) open.push_back({c, next});
  }
}

std::vector<Node*> Program::nodes() const {
  std::vector<Node*> out;
  out.reserve(static_cast<size_t>(next_id_));  // every node made: no regrowth copies on large programs
  for_each([&](Node* n) { out.push_back(n); });
  return out;
}

std::unique_ptr<Program> clone_program(const Program& src, std::vector<std::pair<const Node*, Node*>>* out_map) {
  auto dst = std::make_unique<Program>();
  dst->name = src.name;
  dst->num_outputs = src.num_outputs;
  dst->next_kernel_id = src.next_kernel_id;
  dst->schedule = src.schedule;
  std::unordered_map<const Node*, Node*> map;
  map[src.root()] = dst->root();
  std::vector<Node*> order = src.nodes();
  // First create every node (operands may refer forward through vars/loops only by order, but
  // shapes and operands always refer to nodes created earlier in program order or to scopes).
  for (Node* n : order) {
    Node* c = dst->create(n->op, n->dtype);
    copy_attrs(*c, *n);
    map[n] = c;
  }
  auto m = [&](Node* n) { auto it = map.find(n); EMBER_INTERNAL_ASSERT(it != map.end(), "clone: dangling reference"); return it->second; };
  for (Node* n : order) {
    Node* c = map[n];
    std::vector<Node*> shape;
    for (Node* d : n->shape) shape.push_back(m(d));
    dst->set_shape(c, std::move(shape));
    for (Node* o : n->operands) dst->add_operand(c, m(o));
    for (Node* p : n->params()) c->params_mut().push_back(m(p));
    for (Node* p : n->memories()) c->memories_mut().push_back(m(p));
    dst->append(m(n->parent), c);
  }
  for (Node* a : src.args) dst->args.push_back(a ? m(a) : nullptr);
  for (Node* d : src.dims) dst->dims.push_back(m(d));
  if (out_map)
    for (auto& kv : map) out_map->push_back(kv);
  return dst;
}

}  // namespace ember
