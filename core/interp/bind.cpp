// HostTensor helpers and argument binding: checks call arguments against the program's
// annotations (count, kind, dtype, rank, fixed and symbolic dims) before anything runs.
#include <sstream>

#include "core/interp/interp.h"
#include "core/ir/shape.h"

namespace ember {

int64_t elements_capped(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0) return 0;
  }
  for (int64_t d : shape) {
    if (d > kMaxTensorElements || n > kMaxTensorElements / d) return kMaxTensorElements + 1;
    n *= d;
  }
  return n;
}

int64_t HostTensor::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

HostTensor HostTensor::alloc(DType t, std::vector<int64_t> shape, bool zero) {
  HostTensor h;
  h.dtype = t;
  h.shape = std::move(shape);
  int64_t n = 1;
  for (int64_t d : h.shape) {
    EMBER_INTERNAL_ASSERT(d >= 0, "negative dimension " << d << " in an allocation");
    n *= d;
  }
  // One extra word keeps `data` non-null for empty tensors.
  size_t words = static_cast<size_t>(n) + 1;
  std::shared_ptr<uint32_t[]> storage(zero ? new uint32_t[words]() : new uint32_t[words]);
  h.data = storage.get();
  h.owner = std::shared_ptr<void>(storage, storage.get());
  return h;
}

HostTensor HostTensor::scalar(DType t, uint32_t word) {
  HostTensor h = alloc(t, {}, false);
  h.data[0] = word;
  return h;
}

namespace {

std::string tuple_str(const std::vector<int64_t>& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  if (s.size() == 1) out += ",";
  return out + ")";
}

std::string arg_name(const Node* a, size_t pos) {
  return a->name.empty() ? "#" + std::to_string(pos) : a->name.str();
}

}  // namespace

std::vector<int64_t> bind_arguments(const Program& p, const std::vector<ArgValue>& args) {
  std::vector<int64_t> dims(p.dims.size(), -1);
  std::vector<const Node*> bound_by(p.dims.size(), nullptr);
  for (size_t i = 0; i < p.dims.size(); ++i) {
    const Node* d = p.dims[i];
    EMBER_INTERNAL_ASSERT(d && d->op == Op::shape_arg && d->index == static_cast<int>(i),
                          "Program::dims[" << i << "] is not the shape_arg at position " << i);
  }

  if (args.size() != p.args.size()) {
    std::ostringstream os;
    os << p.name << ": expected " << p.args.size() << " argument" << (p.args.size() == 1 ? "" : "s") << " (";
    for (size_t i = 0; i < p.args.size(); ++i) os << (i ? ", " : "") << (p.args[i] ? arg_name(p.args[i], i) : "?");
    os << "), got " << args.size();
    throw TypeError(os.str());
  }

  for (size_t i = 0; i < args.size(); ++i) {
    const Node* a = p.args[i];
    EMBER_INTERNAL_ASSERT(a, "argument position " << i << " has no node");
    EMBER_INTERNAL_ASSERT(a->index == static_cast<int>(i), "argument node index " << a->index << " at position " << i);
    const ArgValue& v = args[i];
    std::string name = arg_name(a, i);

    if (a->op == Op::scalar_arg) {
      if (v.is_tensor)
        EMBER_USER_ERROR(TypeError, a->loc, "argument '" << name << "': expected a scalar, got a tensor");
      continue;
    }
    EMBER_INTERNAL_ASSERT(a->op == Op::input, "argument " << name << " is a " << op_name(a->op));
    if (!v.is_tensor)
      EMBER_USER_ERROR(TypeError, a->loc, "argument '" << name << "': expected a tensor " << dtype_name(a->dtype)
                                                       << shape_str(a->shape) << ", got a scalar");
    const HostTensor& t = v.tensor;
    if (t.dtype != a->dtype)
      EMBER_USER_ERROR(TypeError, a->loc, "argument '" << name << "': expected dtype " << dtype_name(a->dtype)
                                                       << ", got " << dtype_name(t.dtype));

    // Describes the expected shape with the symbolic dims already bound by earlier arguments.
    auto expected = [&]() {
      std::string s = "expected shape " + shape_str(a->shape);
      std::string with;
      for (const Node* d : a->shape) {
        if (d->op != Op::shape_arg) continue;
        auto k = static_cast<size_t>(d->index);
        if (k >= dims.size() || !bound_by[k] || bound_by[k] == a) continue;
        if (with.find(d->name + " = ") != std::string::npos) continue;
        with += (with.empty() ? "" : ", ") + d->name + " = " + std::to_string(dims[k]) + " (from '" +
                arg_name(bound_by[k], static_cast<size_t>(bound_by[k]->index)) + "')";
      }
      return with.empty() ? s : s + " with " + with;
    };

    for (int64_t d : t.shape)
      if (d < 0)
        EMBER_USER_ERROR(ShapeError, a->loc, "argument '" << name << "': negative dimension in shape " << tuple_str(t.shape));
    for (size_t k = 0; k < t.shape.size(); ++k)
      if (t.shape[k] > kMaxTensorElements)
        EMBER_USER_ERROR(ShapeError, a->loc, "argument '" << name << "': dimension " << k << " of shape "
                                                          << tuple_str(t.shape) << " is " << t.shape[k]
                                                          << "; a dimension is at most 2147483647 (2^31 - 1)");
    if (elements_capped(t.shape) > kMaxTensorElements) {
      long double n = 1;
      for (int64_t d : t.shape) n *= static_cast<long double>(d);
      EMBER_USER_ERROR(ShapeError, a->loc, "argument '" << name << "': shape " << tuple_str(t.shape) << " has "
                                                        << static_cast<unsigned long long>(n)
                                                        << " elements; a tensor holds at most 2147483647 (2^31 - 1)");
    }
    if (t.shape.size() != a->shape.size())
      EMBER_USER_ERROR(ShapeError, a->loc, "argument '" << name << "': " << expected() << " (rank " << a->shape.size()
                                                        << "), got " << tuple_str(t.shape) << " (rank " << t.shape.size() << ")");
    // Check fixed dims and symbolic dims bound by earlier arguments before binding new ones, so
    // the message can cite where the bound values came from.
    for (size_t k = 0; k < a->shape.size(); ++k) {
      const Node* d = a->shape[k];
      int64_t actual = t.shape[k];
      if (d->op == Op::constant) {
        if (actual != d->i())
          EMBER_USER_ERROR(ShapeError, a->loc, "argument '" << name << "': " << expected() << ", got " << tuple_str(t.shape));
      } else if (d->op == Op::shape_arg) {
        auto j = static_cast<size_t>(d->index);
        EMBER_INTERNAL_ASSERT(j < dims.size() && p.dims[j] == d, "shape_arg " << d->name << " is not in Program::dims");
        if (bound_by[j] && bound_by[j] != a) {
          if (dims[j] != actual)
            EMBER_USER_ERROR(ShapeError, a->loc, "argument '" << name << "': " << expected() << ", got " << tuple_str(t.shape));
        } else if (bound_by[j] == a) {
          if (dims[j] != actual)  // the same symbol twice in one shape: [N, N]
            EMBER_USER_ERROR(ShapeError, a->loc, "argument '" << name << "': expected shape " << shape_str(a->shape)
                                                              << " (equal '" << d->name << "' dims), got " << tuple_str(t.shape));
        } else {
          dims[j] = actual;
          bound_by[j] = a;
        }
      } else {
        EMBER_INTERNAL_ASSERT(false, "argument " << name << " has a dimension that is neither a constant nor a shape_arg");
      }
    }
    if (t.size() > 0 && !t.data)
      EMBER_USER_ERROR(TypeError, a->loc, "argument '" << name << "': tensor has no data");
  }
  return dims;
}

}  // namespace ember
