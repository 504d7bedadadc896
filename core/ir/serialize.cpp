#include "core/ir/serialize.h"

#include <cstdio>
#include <cstring>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/ir/printer.h"
#include "core/support/hash.h"

namespace ember {

namespace {

constexpr char kMagic[8] = {'E', 'M', 'B', 'E', 'R', 'I', 'R', '\0'};
// Loading refuses deeper nesting (the printer and the verifier recurse once per level) and more
// node ids (the interpreter allocates a slot per id): far beyond any traced program.
constexpr size_t kMaxDepth = 10000;
constexpr uint32_t kMaxIds = 1u << 26;

template <class>
constexpr bool kAlwaysFalse = false;

// Number of values of each enum an attribute may hold (the loader range-checks them).
template <class E>
constexpr int kEnumCount = 0;
template <>
constexpr int kEnumCount<IndexMode> = 3;  // clamp, unsafe, wrap

constexpr int kAttrCount = 0
#define EMBER_COUNT_ATTR(type, name, init, role) +1
    EMBER_NODE_ATTRS(EMBER_COUNT_ATTR)
#undef EMBER_COUNT_ATTR
    ;
static_assert(kAttrCount <= 32, "serialize_program keeps a 32-bit mask of the attributes that differ from their defaults");

// The op table, the attribute list (types, names, roles) and the enum ranges, hashed: a blob
// written by an Ember whose IR differs in any of them is refused.
uint64_t schema_hash() {
  static const uint64_t h = [] {
    std::string s = "ops:";
    for (int i = 0; i < kOpCount; ++i) {
      const OpInfo& o = op_info(static_cast<Op>(i));
      s += std::string(o.name) + "/" + std::to_string(o.arity) + "/" + std::to_string(static_cast<int>(o.rule)) + "/" +
           std::to_string(o.flags) + ";";
    }
    s += "attrs:";
#define EMBER_SCHEMA_ATTR(type, name, init, role) s += #type " " #name " " #role ";";
    EMBER_NODE_ATTRS(EMBER_SCHEMA_ATTR)
#undef EMBER_SCHEMA_ATTR
    s += "dtypes:" + std::to_string(static_cast<int>(DType::boolean)) + ";index_modes:" +
         std::to_string(kEnumCount<IndexMode>);
    return fnv1a64_mixed(s);
  }();
  return h;
}

// ---- Writing ----

class Writer {
 public:
  std::string body;

  void byte(uint8_t v) { body.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) {
    while (v >= 0x80) {
      byte(static_cast<uint8_t>(v | 0x80));
      v >>= 7;
    }
    byte(static_cast<uint8_t>(v));
  }
  void i32(int32_t v) { u32((static_cast<uint32_t>(v) << 1) ^ static_cast<uint32_t>(v >> 31)); }  // zigzag
  void str(const std::string& s) {
    auto [it, fresh] = ids_.emplace(s, static_cast<uint32_t>(strings_.size()));
    if (fresh) strings_.push_back(&it->first);
    u32(it->second);
  }
  // The string table, then the body.
  std::string finish() {
    Writer t;
    t.u32(static_cast<uint32_t>(strings_.size()));
    for (const std::string* s : strings_) {
      t.u32(static_cast<uint32_t>(s->size()));
      t.body += *s;
    }
    return t.body + body;
  }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<const std::string*> strings_;
};

// ---- Reading (every read bounds-checked) ----

[[noreturn]] void bad(const std::string& what) { throw Error("ember: cannot load the saved program: " + what); }

class Reader {
 public:
  Reader(const char* p, const char* end) : p_(reinterpret_cast<const uint8_t*>(p)), end_(reinterpret_cast<const uint8_t*>(end)) {}

  size_t left() const { return static_cast<size_t>(end_ - p_); }
  uint8_t byte() {
    if (p_ == end_) bad("truncated");
    return *p_++;
  }
  uint32_t u32() {
    uint32_t v = 0;
    for (int shift = 0; shift < 35; shift += 7) {
      const uint8_t b = byte();
      if (shift == 28 && (b & 0xf0)) bad("varint out of range");
      v |= static_cast<uint32_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    bad("varint out of range");
  }
  int32_t i32() {
    const uint32_t z = u32();
    return static_cast<int32_t>((z >> 1) ^ (0u - (z & 1)));
  }
  // A count of items each taking at least one more byte: never more than what is left.
  size_t count() {
    const uint32_t n = u32();
    if (n > left()) bad("count " + std::to_string(n) + " exceeds the remaining input");
    return n;
  }
  std::string_view bytes(size_t n) {
    if (n > left()) bad("truncated");
    std::string_view s(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    return s;
  }
  void read_strings() {
    const size_t n = count();
    strings_.reserve(n);
    for (size_t i = 0; i < n; ++i) strings_.emplace_back(bytes(count()));
  }
  const std::string& str() {
    const uint32_t i = u32();
    if (i >= strings_.size()) bad("string index out of range");
    return strings_[i];
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
  std::vector<std::string> strings_;
};

// ---- Attribute codec: one case per attribute type of EMBER_NODE_ATTRS ----

template <class T>
void put(Writer& w, const T& v) {
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t>) {
    w.byte(static_cast<uint8_t>(v));
  } else if constexpr (std::is_same_v<T, uint32_t>) {
    w.u32(v);
  } else if constexpr (std::is_same_v<T, int>) {
    w.i32(v);
  } else if constexpr (std::is_enum_v<T>) {
    static_assert(kEnumCount<T> > 0, "serialize_program: give this enum attribute type a kEnumCount");
    w.u32(static_cast<uint32_t>(v));
  } else if constexpr (std::is_same_v<T, ThinString>) {
    w.str(v);
  } else if constexpr (std::is_same_v<T, ThinVec<int>>) {
    w.u32(static_cast<uint32_t>(v.size()));
    for (int x : v) w.i32(x);
  } else if constexpr (std::is_same_v<T, SourceLoc>) {
    w.str(v.file());
    w.i32(v.line);
  } else {
    static_assert(kAlwaysFalse<T>, "serialize_program: an EMBER_NODE_ATTRS attribute has a type the codec does not "
                                   "handle; add it to put() and get() in core/ir/serialize.cpp");
  }
}

template <class T>
void get(Reader& r, T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    const uint8_t b = r.byte();
    if (b > 1) bad("bool attribute is " + std::to_string(b));
    v = b != 0;
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    v = r.byte();
  } else if constexpr (std::is_same_v<T, uint32_t>) {
    v = r.u32();
  } else if constexpr (std::is_same_v<T, int>) {
    v = r.i32();
  } else if constexpr (std::is_enum_v<T>) {
    const uint32_t x = r.u32();
    if (x >= static_cast<uint32_t>(kEnumCount<T>)) bad("enum attribute out of range (" + std::to_string(x) + ")");
    v = static_cast<T>(x);
  } else if constexpr (std::is_same_v<T, ThinString>) {
    v = r.str();
  } else if constexpr (std::is_same_v<T, ThinVec<int>>) {
    v.resize(r.count());
    for (int& x : v) x = r.i32();
  } else if constexpr (std::is_same_v<T, SourceLoc>) {
    const std::string file = r.str();
    v = SourceLoc(file, r.i32());
  } else {
    static_assert(kAlwaysFalse<T>, "deserialize_program: add this attribute type to get() in core/ir/serialize.cpp");
  }
}

template <class T>
bool same_value(const T& a, const T& b) {
  return a == b;
}

// Attributes that differ from their defaults (bit k: the k-th of the list), then their values.
void put_attrs(Writer& w, const NodeAttrs& a) {
  static const NodeAttrs defaults;
  uint32_t mask = 0;
  int k = 0;
#define EMBER_MASK_ATTR(type, name, init, role) \
  if (!same_value(a.name, defaults.name)) mask |= 1u << k; \
  ++k;
  EMBER_NODE_ATTRS(EMBER_MASK_ATTR)
#undef EMBER_MASK_ATTR
  w.u32(mask);
  k = 0;
#define EMBER_PUT_ATTR(type, name, init, role) \
  if (mask & (1u << k)) put(w, a.name);        \
  ++k;
  EMBER_NODE_ATTRS(EMBER_PUT_ATTR)
#undef EMBER_PUT_ATTR
}

void get_attrs(Reader& r, NodeAttrs& a) {
  const uint32_t mask = r.u32();
  if (mask >> kAttrCount) bad("unknown attribute bits");
  int k = 0;
#define EMBER_GET_ATTR(type, name, init, role) \
  if (mask & (1u << k)) get(r, a.name);        \
  ++k;
  EMBER_NODE_ATTRS(EMBER_GET_ATTR)
#undef EMBER_GET_ATTR
}

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

enum RecordFlags : uint8_t { kHasKernelLists = 1 };

// Checks the loader makes beyond the verifier: what the printer, interpreter and backends index
// by (enum attributes used as table indices, argument and dim positions).
void check_node(const Node* n) {
  const OpInfo& info = op_info(n->op);
  const int no = n->num_operands();
  if (info.arity >= 0 && no != info.arity)
    bad(std::string(info.name) + " has " + std::to_string(no) + " operands, expected " + std::to_string(info.arity));
  if ((n->op == Op::load && no < 1) || ((n->op == Op::store || n->op == Op::atomic) && no < 2))
    bad(std::string(info.name) + " lacks operands");
  if ((n->op == Op::reduce || n->op == Op::scan) && n->kind > static_cast<uint8_t>(ReduceKind::argmin))
    bad("reduction kind out of range");
  if (n->op == Op::atomic && n->kind > static_cast<uint8_t>(AtomicKind::exchange)) bad("atomic kind out of range");
  for (const Node* m : n->memories())
    if (!m->is_memory()) bad("a kernel's memory list holds a " + std::string(op_name(m->op)));
}

}  // namespace

std::string program_schema_id() {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(schema_hash()));
  return buf;
}

std::string serialize_program(const Program& p) {
  // Record indices: the tree in pre-order (root first), then unlinked nodes that something
  // refers to (found transitively), in the order they are found.
  std::vector<const Node*> order;
  std::unordered_map<const Node*, uint32_t> index;
  auto add = [&](const Node* n) {
    if (index.emplace(n, static_cast<uint32_t>(order.size())).second) order.push_back(n);
  };
  add(p.root());
  p.for_each([&](Node* n) { add(n); });
  const size_t tree = order.size();
  auto note = [&](const Node* n) {
    if (!n) return;
    if (n->dead) throw Error("serialize_program: " + std::string(op_name(n->op)) + " %" + std::to_string(n->id) +
                             " is referred to but erased");
    if (!index.count(n)) {
      if (n->first_child) throw Error("serialize_program: unlinked " + std::string(op_name(n->op)) + " %" +
                                      std::to_string(n->id) + " has children");
      add(n);
    }
  };
  for (const Node* a : p.args) note(a);
  for (const Node* d : p.dims) note(d);
  for (size_t i = 0; i < order.size(); ++i) {  // grows while unlinked nodes are found
    const Node* n = order[i];
    for (const Node* d : n->shape) note(d);
    for (const Node* o : n->operands) note(o);
    for (const Node* o : n->params()) note(o);
    for (const Node* o : n->memories()) note(o);
  }
  if (p.next_id() > static_cast<int>(kMaxIds)) throw Error("serialize_program: too many node ids");

  Writer w;
  auto ref = [&](const Node* n) { w.u32(n ? index.at(n) + 1 : 0); };
  auto refs = [&](const std::vector<Node*>& v) {
    w.u32(static_cast<uint32_t>(v.size()));
    for (const Node* n : v) ref(n);
  };
  w.str(p.name);
  w.i32(p.num_outputs);
  w.i32(p.next_kernel_id);
  w.u32(static_cast<uint32_t>(p.next_id()));
  w.u32(static_cast<uint32_t>(order.size()));
  w.u32(static_cast<uint32_t>(tree));
  size_t depth = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const Node* n = order[i];
    w.byte(static_cast<uint8_t>(n->op));
    w.byte(static_cast<uint8_t>(n->dtype));
    w.u32(static_cast<uint32_t>(n->id));
    const bool lists = !n->params().empty() || !n->memories().empty();
    w.byte(lists ? kHasKernelLists : 0);
    put_attrs(w, *n);
    refs(n->shape);
    refs(n->operands);
    if (lists) {
      refs(n->params());
      refs(n->memories());
    }
    if (i < tree && n->is_scope()) {
      uint32_t children = 0;
      for (const Node* c = n->first_child; c; c = c->next) ++children;
      w.u32(children);
      size_t d = 0;
      for (const Node* s = n; s->parent; s = s->parent) ++d;
      if (d + 1 > depth) depth = d + 1;
    }
  }
  if (depth > kMaxDepth) throw Error("serialize_program: the program nests " + std::to_string(depth) + " scopes deep");
  refs(p.args);
  refs(p.dims);

  std::string out(kMagic, sizeof kMagic);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((kProgramFormatVersion >> (8 * i)) & 0xff));
  put_u64(out, schema_hash());
  out += w.finish();
  put_u64(out, fnv1a64_mixed(out));
  return out;
}

std::unique_ptr<Program> deserialize_program(std::string_view bytes, const VerifyOptions& verify_options,
                                             bool check_checksum, bool run_verifier) {
  constexpr size_t kHeader = sizeof kMagic + 4 + 8;
  if (bytes.size() < kHeader + 8) bad("truncated (" + std::to_string(bytes.size()) + " bytes)");
  if (std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) bad("not a saved Ember program");
  uint32_t version = 0;
  for (int i = 0; i < 4; ++i) version |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[sizeof kMagic + i])) << (8 * i);
  if (version != kProgramFormatVersion)
    bad("format version " + std::to_string(version) + ", expected " + std::to_string(kProgramFormatVersion));
  if (get_u64(bytes.data() + sizeof kMagic + 4) != schema_hash()) bad("written by an Ember with another IR schema");
  const size_t end = bytes.size() - 8;
  if (check_checksum && get_u64(bytes.data() + end) != fnv1a64_mixed(bytes.substr(0, end))) bad("checksum mismatch");

  Reader r(bytes.data() + kHeader, bytes.data() + end);
  r.read_strings();
  auto p = std::make_unique<Program>();
  p->name = r.str();
  p->num_outputs = r.i32();
  p->next_kernel_id = r.i32();
  const uint32_t next_id = r.u32();
  if (next_id > kMaxIds) bad("too many node ids");
  const size_t count = r.count();
  const uint32_t tree = r.u32();
  if (count < 1 || tree < 1 || tree > count) bad("bad node counts");

  // Pass 1: every node, unlinked, with its attributes; references kept as record indices
  // (they may point forward: shape dims, a loop's counter used by its body...).
  std::vector<Node*> nodes(count);
  std::vector<uint32_t> refs;  // per node: shape, operands, params, memories, each count-prefixed
  refs.reserve(r.left());      // at most one per byte left
  std::vector<size_t> ref_at(count);
  std::vector<uint32_t> children(count, 0);
  std::vector<bool> id_used(next_id, false);
  auto read_refs = [&](bool allow_null) {
    const size_t n = r.count();
    refs.push_back(static_cast<uint32_t>(n));
    for (size_t k = 0; k < n; ++k) {
      const uint32_t x = r.u32();
      if (x > count || (x == 0 && !allow_null)) bad("node reference out of range");
      refs.push_back(x);
    }
  };
  for (size_t i = 0; i < count; ++i) {
    const uint8_t op = r.byte();
    if (op >= kOpCount) bad("op " + std::to_string(op) + " out of range");
    const uint8_t dtype = r.byte();
    if (dtype > static_cast<uint8_t>(DType::boolean)) bad("dtype " + std::to_string(dtype) + " out of range");
    if ((i == 0) != (op == static_cast<uint8_t>(Op::program))) bad("the root must be the only program node");
    Node* n = i == 0 ? p->root() : p->create(static_cast<Op>(op), static_cast<DType>(dtype));
    n->dtype = static_cast<DType>(dtype);
    const uint32_t id = r.u32();
    if (id >= next_id || id_used[id] || (i == 0) != (id == 0)) bad("node id " + std::to_string(id) + " invalid or repeated");
    id_used[id] = true;
    n->id = static_cast<int>(id);
    const uint8_t flags = r.byte();
    if (flags & ~kHasKernelLists) bad("unknown record flags");
    get_attrs(r, *n);
    ref_at[i] = refs.size();
    read_refs(false);  // shape
    read_refs(false);  // operands
    if (flags & kHasKernelLists) {
      read_refs(false);
      read_refs(false);
    } else {
      refs.push_back(0);
      refs.push_back(0);
    }
    if (i < tree && n->is_scope()) children[i] = r.u32();
    nodes[i] = n;
  }
  std::vector<Node*> args, dims;
  auto read_list = [&](std::vector<Node*>& out, bool allow_null) {
    const size_t n = r.count();
    for (size_t k = 0; k < n; ++k) {
      const uint32_t x = r.u32();
      if (x > count || (x == 0 && !allow_null)) bad("argument reference out of range");
      out.push_back(x ? nodes[x - 1] : nullptr);
    }
  };
  read_list(args, true);
  read_list(dims, false);
  if (r.left() != 0) bad(std::to_string(r.left()) + " bytes of trailing data");
  p->reserve_ids(static_cast<int>(next_id));

  // Pass 2: shapes, operands and kernel lists (use lists and dim use lists follow, sized first).
  std::vector<uint32_t> uses(count, 0), dim_uses(count, 0);
  for (size_t i = 0; i < count; ++i) {
    size_t at = ref_at[i];
    for (uint32_t k = 0, n = refs[at]; k < n; ++k) ++dim_uses[refs[at + 1 + k] - 1];
    at += 1 + refs[at];
    for (uint32_t k = 0, n = refs[at]; k < n; ++k) ++uses[refs[at + 1 + k] - 1];
  }
  for (size_t i = 0; i < count; ++i) {
    nodes[i]->users.reserve(uses[i]);
    if (dim_uses[i]) nodes[i]->dim_users_mut().reserve(dim_uses[i]);  // (NodeLists only where used)
  }
  for (size_t i = 0; i < count; ++i) {
    Node* n = nodes[i];
    size_t at = ref_at[i];
    auto take = [&]() {
      std::vector<Node*> v(refs[at]);
      for (Node*& x : v) x = nodes[refs[++at] - 1];
      ++at;
      return v;
    };
    std::vector<Node*> shape = take();
    std::vector<Node*> operands = take();
    std::vector<Node*> params = take();
    std::vector<Node*> memories = take();
    if (!params.empty()) n->params_mut() = params;
    if (!memories.empty()) n->memories_mut() = memories;
    if (i == 0 && (!shape.empty() || !operands.empty() || !n->params().empty() || !n->memories().empty()))
      bad("the root has a shape or operands");
    p->set_shape(n, std::move(shape));
    n->operands.reserve(operands.size());
    for (Node* o : operands) p->add_operand(n, o);
    check_node(n);
  }

  // Pass 3: the tree, from the pre-order records and their child counts.
  std::vector<std::pair<Node*, uint32_t>> open{{nodes[0], children[0]}};  // scopes still taking children
  for (size_t i = 1; i < tree; ++i) {
    while (!open.empty() && open.back().second == 0) open.pop_back();
    if (open.empty()) bad("more nodes than the scopes hold");
    --open.back().second;
    p->append(open.back().first, nodes[i]);
    if (children[i]) {
      if (open.size() >= kMaxDepth) bad("scopes nest too deep");
      open.emplace_back(nodes[i], children[i]);
    }
  }
  for (auto& [scope, left] : open)
    if (left) bad("a scope holds fewer nodes than it says");

  for (size_t k = 0; k < args.size(); ++k)
    if (args[k] && ((args[k]->op != Op::input && args[k]->op != Op::scalar_arg) || args[k]->index != static_cast<int>(k)))
      bad("argument " + std::to_string(k) + " is not an argument node at its position");
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k]->op != Op::shape_arg || dims[k]->index != static_cast<int>(k))
      bad("dim " + std::to_string(k) + " is not a shape_arg at its position");
  p->args = std::move(args);
  p->dims = std::move(dims);
  if (run_verifier) {
    VerifyOptions vo = verify_options;
    vo.use_lists = false;  // just built by create / set_shape / add_operand from the operands and shapes
    verify(*p, vo);
  }
  return p;
}

std::string unprinted_attributes(const Program& p) {
  // Per op, the attributes to write: metadata, and the semantic ones the printer leaves out.
  static const std::vector<uint32_t> masks = [] {
    std::vector<uint32_t> m(kOpCount, 0);
    for (int o = 0; o < kOpCount; ++o) {
      int k = 0;
#define EMBER_UNPRINTED_ATTR(type, name, init, role)                                              \
  if (AttrRole::role == AttrRole::metadata || printer_omits(static_cast<Op>(o), #name)) m[o] |= 1u << k; \
  ++k;
      EMBER_NODE_ATTRS(EMBER_UNPRINTED_ATTR)
#undef EMBER_UNPRINTED_ATTR
    }
    return m;
  }();
  Writer w;
  p.for_each([&](Node* n) {
    const uint32_t mask = masks[static_cast<size_t>(n->op)];
    int k = 0;
#define EMBER_PUT_UNPRINTED(type, name, init, role) \
  if (mask & (1u << k)) put(w, n->name);            \
  ++k;
    EMBER_NODE_ATTRS(EMBER_PUT_UNPRINTED)
#undef EMBER_PUT_UNPRINTED
  });
  return w.finish();
}

}  // namespace ember
