#include "core/passes/check_shapes.h"

#include "core/ir/shape.h"

namespace ember {

bool check_shapes(Program& p) {
  p.for_each([&](Node* n) {
    const OpInfo& info = op_info(n->op);
    if (info.flags & F_ELEMENTWISE) {
      for (Node* o : n->operands)
        if (!o->shape.empty() && !same_shape(o->shape, n->shape))
          EMBER_USER_ERROR(ShapeError, n->loc, op_name(n->op) << ": operand of shape " << shape_str(o->shape)
                                                              << " does not match the result shape " << shape_str(n->shape));
    }
    if (n->op == Op::load || n->op == Op::store || n->op == Op::atomic) {
      Node* mem = n->operand(0);
      int nidx = n->num_operands() - n->first_index_operand();
      if (!n->flat && nidx != mem->rank())
        EMBER_USER_ERROR(ShapeError, n->loc, "indexing a tensor of shape " << shape_str(mem->shape) << " with " << nidx
                                                                           << " indices");
      for (int i = n->first_index_operand(); i < n->num_operands(); ++i) {
        Node* ix = n->operand(i);
        if (ix->dtype != DType::i32 && ix->dtype != DType::u32)
          EMBER_USER_ERROR(TypeError, n->loc, "index " << i - n->first_index_operand() << " has dtype "
                                                       << dtype_name(ix->dtype) << ", expected an integer");
        if (!ix->shape.empty() && !same_shape(ix->shape, n->shape))
          EMBER_USER_ERROR(ShapeError, n->loc, "index of shape " << shape_str(ix->shape) << " for an access of shape "
                                                                 << shape_str(n->shape));
      }
    }
    if (n->op != Op::group_buffer && n->parent && !n->parent->shape.empty() && !n->shape.empty() &&
        !same_shape(n->shape, n->parent->shape))
      EMBER_USER_ERROR(ShapeError, n->loc, op_name(n->op) << " of shape " << shape_str(n->shape) << " inside a "
                                                          << op_name(n->parent->op) << " of shape "
                                                          << shape_str(n->parent->shape));
    if (n->op == Op::break_ || n->op == Op::continue_) {
      bool in_loop = false;
      for (Node* s = n->parent; s && s->op != Op::kernel; s = s->parent) in_loop |= s->op == Op::loop;
      if (!in_loop) EMBER_USER_ERROR(Error, n->loc, op_name(n->op) << " outside a loop");
    }
  });
  return false;
}

}  // namespace ember
