// Tracing: the user-level operations that the Python front end (and C++ users) call while a
// traced function runs. Does dtype promotion, NumPy broadcasting (made explicit as loads with
// broadcast indices), NumPy-style indexing, scopes for control flow, and reports user errors
// with the source line set in `loc`.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <variant>
#include <vector>

#include "core/ir/builder.h"
#include "core/ir/node.h"

namespace ember {

// One dimension of an argument annotation: fixed (int), symbolic (named) or free.
struct DimSpec {
  enum Kind { fixed, symbolic, free } kind = fixed;
  int64_t size = 0;
  std::string name;
};

// One item of an index expression A[...]: a tensor/scalar index, a slice, or a new axis.
struct IndexItem {
  enum Kind { tensor, slice, newaxis, ellipsis } kind = tensor;
  Node* value = nullptr;                    // tensor: integer index values (any shape)
  std::optional<int64_t> start, stop;       // slice bounds as in Python (None = default)
  int64_t step = 1;
};

class Tracer {
 public:
  explicit Tracer(const std::string& name);
  Program& program() { return *prog_; }
  std::unique_ptr<Program> release() { return std::move(prog_); }
  Builder& builder() { return b_; }
  void set_loc(const std::string& file, int line) { b_.loc = SourceLoc{file, line}; }
  const SourceLoc& loc() const { return b_.loc; }

  // Arguments, in positional order.
  Node* input(DType t, const std::vector<DimSpec>& dims, const std::string& name);
  Node* scalar(DType t, const std::string& name);
  void output(Node* value);

  Node* constant(double v, DType t);
  Node* unary(Op op, Node* x);                // float-only ops convert integer inputs to f32
  Node* binary(Op op, Node* a, Node* b);      // promotes and broadcasts
  Node* select(Node* c, Node* a, Node* b);
  Node* cast(Node* x, DType t);
  Node* bitcast(Node* x, DType t);
  Node* broadcast_to(Node* x, const std::vector<Node*>& shape);
  // A scalar as a tensor of `shape` holding it everywhere (em.broadcast_to of a scalar).
  Node* spread(Node* x, const std::vector<Node*>& shape);

  Node* indices(const std::vector<Node*>& shape, int axis);
  Node* dim(Node* x, int axis);               // x.shape[axis] as a scalar i32 value
  Node* gather(Node* x, const std::vector<IndexItem>& items, IndexMode m = IndexMode::clamp);
  void scatter(Node* mem, const std::vector<IndexItem>& items, Node* value, IndexMode m = IndexMode::clamp);
  Node* atomic(AtomicKind k, Node* target_load, Node* value);

  Node* reduce(ReduceKind k, Node* x, std::vector<int> axes, bool keepdims);  // empty axes: all
  Node* mean(Node* x, std::vector<int> axes, bool keepdims);

  // Algorithms (algorithm_ops.cpp). norm: sqrt(sum(x * x)) over the axes (f32). prefix_sum: the
  // inclusive scan along `axis` (np.cumsum; bool scans as i32), lowered to a blocked parallel
  // scan. matmul: np.matmul (1-D operands promoted, batch dims broadcast); dot: np.dot. Both are
  // a sum over the shared axis of a broadcast product, so the product fuses into the loop.
  Node* norm(Node* x, std::vector<int> axes, bool keepdims);
  Node* prefix_sum(Node* x, int axis);
  Node* matmul(Node* a, Node* b);
  Node* dot(Node* a, Node* b);

  Node* zeros(const std::vector<Node*>& shape, DType t);
  Node* buffer(const std::vector<Node*>& shape, DType t);

  // Shape operations (shape_ops.cpp). Each result is a gather of the source at remapped
  // coordinates (index math only), so it composes with other gathers and does not stop fusion.
  // Negative axes count from the end.
  // Row-major reshape; one dim may be nullptr (NumPy's -1: inferred). Dims may be symbolic.
  Node* reshape(Node* x, const std::vector<Node*>& shape);
  // Result axis k is source axis axes[k]; empty `axes` reverses the axes (x.T).
  Node* transpose(Node* x, std::vector<int> axes = {});
  // Drops the given axes (each of size 1); empty `axes` drops every axis of fixed size 1.
  Node* squeeze(Node* x, std::vector<int> axes = {});
  // Inserts an axis of size 1 so that it is axis `axis` of the result.
  Node* unsqueeze(Node* x, int axis);
  // Joins along an existing axis (other dims must match; dtypes promote): a select chain.
  Node* concat(const std::vector<Node*>& xs, int axis = 0);
  // Joins along a new axis `axis` (all shapes equal): unsqueeze + concat.
  Node* stack(const std::vector<Node*>& xs, int axis = 0);
  // np.repeat with an int count: each element `repeats` times along `axis`; no axis: flattened.
  Node* repeat(Node* x, int64_t repeats, std::optional<int> axis = std::nullopt);
  // Reverses the given axes; empty `axes` reverses all of them.
  Node* flip(Node* x, std::vector<int> axes = {});
 private:
  // Host-level arithmetic on dimension nodes (placed before the outermost device scope).
  Node* dim_math(Op op, Node* a, Node* b);
 public:

  // Control flow. Every begin_* is matched by end_scope().
  Node* begin_loop(Node* begin, Node* end, Node* step);
  Node* begin_if(Node* cond);
  Node* begin_else();
  // An explicit kernel; a non-empty `group` (one constant per axis) splits it into workgroups.
  std::vector<Node*> begin_kernel(const std::vector<Node*>& shape, const std::vector<int64_t>& group = {});
  void end_scope();
  void break_();
  void continue_();
  Node* var(Node* init);
  void set(Node* var, Node* value);

  // Workgroups (group_ops.cpp), only inside a kernel opened with a group: memory shared by the
  // threads of a group (placed at the kernel's top; constant dims), a barrier (CompileError
  // under control flow that differs between the threads of a group), and the running thread's
  // coordinates within its group and of its group (one node per axis).
  Node* group_buffer(const std::vector<int64_t>& shape, DType t);
  void barrier();
  std::vector<Node*> local_index();
  std::vector<Node*> group_index();

  // Derivatives (core/autodiff): em.grad, em.jvp and x.detach(). detach gives an identity node
  // that gradients do not flow through (em.grad treats it as a constant).
  std::vector<Node*> grad(Node* y, const std::vector<Node*>& xs, Node* dy);
  Node* jvp(Node* y, const std::vector<Node*>& xs, const std::vector<Node*>& dxs);
  Node* detach(Node* x);
  bool is_detached(const Node* n) const { return detached_.count(n) > 0; }

  // A dimension node from an int or an existing scalar i32 value.
  Node* dim_const(int64_t v);
  // Shape of the innermost open scope ([] at host level).
  ShapeView scope_shape() const;

 private:
  std::vector<Node*> broadcast_shapes(const std::vector<Node*>& a, const std::vector<Node*>& b);
  // group_ops.cpp: the innermost open kernel, which must have a group (`what` names the call).
  Node* group_kernel(const char* what);
  // A group buffer may only be read or written one element at a time, in its own kernel.
  void check_group_access(Node* mem, const std::vector<IndexItem>& items);
  // break_/continue_ cannot leave a loop that holds a barrier.
  void check_jump(const char* what);
  // ... nor, under a per-element condition, a host loop.
  void check_jump_target(const char* what);
  Node* gather_at(Node* x, const std::vector<Node*>& idx, const std::vector<Node*>& shape, IndexMode m);
  Node* substitute(Node* e, const std::vector<Node*>& from_shape, const std::vector<Node*>& idx,
                   const std::vector<Node*>& shape, bool& ok);
  struct Resolved;
  Resolved resolve(Node* x, const std::vector<IndexItem>& items);
  Node* align_scatter_value(const Resolved& r, Node* value);
  Node* to_dtype(Node* v, DType t);
  std::vector<Node*> broadcast_index(Node* x, const std::vector<Node*>& shape);
  Node* contract(Node* a, Node* b, const std::vector<Node*>& shape, const std::vector<Node*>& ia,
                 const std::vector<Node*>& ib, int axis);

 public:
  // A memory used as a value reads it element by element (an identity load).
  Node* value(Node* x);

 private:

  std::unique_ptr<Program> prog_;
  Builder b_;
  int num_args_ = 0;
  int num_outputs_ = 0;
  std::vector<Node*> scopes_;
  std::unordered_set<const Node*> detached_;
};

}  // namespace ember
