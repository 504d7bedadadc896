// Creates IR nodes at an insertion point, folding constants and value-numbering pure nodes as
// they are made (so traces stay small and equal programs print equal). Low level: operands
// must already agree in dtype and shape; the tracer (core/trace) does promotion/broadcasting.
#pragma once
#include <vector>

#include "core/ir/node.h"
#include "core/ir/shape.h"

namespace ember {

class Builder {
 public:
  explicit Builder(Program& p);
  Program& program() { return prog_; }

  // Insertion point: at the end of `scope`, or before `pos`.
  void set_insert_end(Node* scope) { scope_ = scope; before_ = nullptr; }
  void set_insert_before(Node* pos) { scope_ = pos->parent; before_ = pos; }
  Node* scope() const { return scope_; }
  Node* before() const { return before_; }
  SourceLoc loc;  // stamped on every node created
  // When set, nodes created take this node's loc instead (read only when a node is made: a pass
  // that rewrites few of the nodes it visits need not read every node's loc).
  const Node* loc_of = nullptr;

  // Constants live at the top of the program (visible everywhere) and are unique per value.
  Node* constant(DType t, uint32_t bits);
  Node* f32(float v) { return constant(DType::f32, f2w(v)); }
  Node* i32(int32_t v) { return constant(DType::i32, i2w(v)); }
  Node* u32(uint32_t v) { return constant(DType::u32, v); }
  Node* boolean(bool v) { return constant(DType::boolean, v ? 1u : 0u); }

  Node* index(int axis, const Shape& shape);
  // Lets value numbering reuse `n`, an index node this builder did not make (a pass seeds the
  // kernels it adds to with their own thread indices, instead of making twins cse merges later).
  void number_index(Node* n);
  // The running thread's coordinate within its workgroup, and its workgroup's coordinate.
  Node* local_index(int axis, const Shape& shape);
  Node* group_index(int axis, const Shape& shape);
  // Elementwise ops; operands' shapes must each be `[]` or the result shape.
  Node* unary(Op op, Node* x);
  Node* binary(Op op, Node* a, Node* b);
  Node* select(Node* c, Node* a, Node* b);
  // a * b + c rounded once (f32 operands).
  Node* fma(Node* a, Node* b, Node* c);
  Node* cast(Node* x, DType t);
  // A uniform (shape []) value as a node of `shape` holding it everywhere (select(true, v, v),
  // never folded back); other values are returned as they are.
  Node* spread(Node* v, const Shape& shape);
  Node* bitcast(Node* x, DType t);

  Node* load(Node* mem, const std::vector<Node*>& idx, const Shape& shape, IndexMode m = IndexMode::clamp);
  Node* store(Node* mem, Node* value, const std::vector<Node*>& idx, const Shape& shape,
              IndexMode m = IndexMode::clamp);
  Node* atomic(AtomicKind k, Node* mem, Node* value, const std::vector<Node*>& idx, const Shape& shape,
               IndexMode m = IndexMode::clamp);
  Node* reduce(ReduceKind k, Node* x, uint32_t axes, bool keepdims, const Shape& out_shape, DType out);

  // Scopes: the caller moves the insertion point inside (set_insert_end(node)).
  Node* loop(Node* begin, Node* end, Node* step, const Shape& shape);
  Node* if_(Node* cond, const Shape& shape);
  Node* else_(const Shape& shape);
  Node* kernel(const Shape& shape);
  Node* var(Node* init, const Shape& shape);
  Node* set(Node* var, Node* value);
  Node* break_(const Shape& shape);
  Node* continue_(const Shape& shape);

  Node* input(DType t, const Shape& shape, int position, const std::string& name);
  Node* scalar_arg(DType t, int position, const std::string& name);
  Node* shape_arg(const std::string& name);
  Node* buffer(DType t, const Shape& shape, bool zero_init);
  Node* output(Node* value, int slot);

  // Generic creation without folding or value numbering; linked at the insertion point.
  Node* raw(Op op, DType t, const Shape& shape, const std::vector<Node*>& operands);

  // Whether n is defined before the insertion point, in its scope or an enclosing one (a node
  // made there could use it).
  bool visible(const Node* n) const;

 private:
  Node* place(Node* n);
  Node* numbered(Op op, DType t, ShapeView shape, std::span<Node* const> operands, const NodeAttrs& attrs);
  Node* fold(Op op, DType t, std::span<Node* const> operands);
  Node* argument(Op op, DType t, const Shape& shape, int position, const std::string& name);

  // Value-numbering candidates: (key, node) pairs in one open-addressing array, several nodes per
  // key (no allocation per node: a pass numbers tens of thousands of nodes in a large program,
  // and a map of vectors scattered them over the heap).
  class Candidates {
   public:
    template <class F>  // f(Node*) for each node inserted with `key`; stops when f returns true
    Node* find(size_t key, F&& f) const {
      if (slots_.empty()) return nullptr;
      for (size_t i = home(key);; i = (i + 1) & (slots_.size() - 1)) {
        const Entry& e = slots_[i];
        if (!e.n) return nullptr;
        if (e.key == key && f(e.n)) return e.n;
      }
    }
    void insert(size_t key, Node* n);

   private:
    struct Entry {
      size_t key = 0;
      Node* n = nullptr;  // null: empty
    };
    void put(const Entry& e);  // into the first free slot from its key's home (there is one)
    size_t home(size_t key) const { return ((key ^ (key >> 29)) * 0xbf58476d1ce4e5b9ull >> 24) & (slots_.size() - 1); }
    std::vector<Entry> slots_;
    size_t used_ = 0;
  };

  Program& prog_;
  Node* scope_;
  Node* before_ = nullptr;
  Candidates vn_;
};

}  // namespace ember
