// DLPack (https://dmlc.github.io/dlpack/latest/) for em.Tensor: capsules exporting a tensor's
// words without a copy (legacy "dltensor" or, for a consumer that asks with max_version >= 1,
// "dltensor_versioned" with the read-only and copied flags), and the import side of
// em.from_dlpack (python/ember/_dlpack.py): a tensor over another library's memory, keeping
// the producer's DLManagedTensor alive until the last tensor over it is gone. The structs are
// the DLPack ABI (v1.x), declared here from the specification.
#include <Python.h>

#include <cstring>

#include "bindings.h"
#include "core/interp/interp.h"
#include "core/ir/error.h"

namespace ember::python {

namespace {

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float, 6 bool
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};
constexpr uint64_t kFlagReadOnly = 1u << 0, kFlagIsCopied = 1u << 1;
constexpr int kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;
constexpr uint32_t kVersionMajor = 1, kVersionMinor = 0;

// What an exported capsule owns: the tensor (so its memory lives) and the shape array.
struct Export {
  HostTensor tensor;
  std::vector<int64_t> shape;
};

template <class Managed>
void delete_export(Managed* m) {
  Export* e = static_cast<Export*>(m->manager_ctx);
  {
    // The tensor's owner may be a Python object (a wrapped NumPy array): dropped under the GIL.
    py::gil_scoped_acquire gil;
    delete e;
  }
  delete m;
}

// Capsule destructors: a capsule nobody consumed still owns its tensor.
void legacy_capsule_dtor(PyObject* cap) {
  if (!PyCapsule_IsValid(cap, "dltensor")) return;  // renamed "used_dltensor" by its consumer
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
  if (m && m->deleter) m->deleter(m);
}
void versioned_capsule_dtor(PyObject* cap) {
  if (!PyCapsule_IsValid(cap, "dltensor_versioned")) return;
  auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(cap, "dltensor_versioned"));
  if (m && m->deleter) m->deleter(m);
}

DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::f32: return {2, 32, 1};
    case DType::i32: return {0, 32, 1};
    default: return {1, 32, 1};  // u32, and bool as its 0/1 words
  }
}

void fill_tensor(DLTensor& d, Export* e, int device_type, int device_id) {
  d.data = e->tensor.data;
  d.device = {device_type, device_id};
  d.ndim = static_cast<int32_t>(e->shape.size());
  d.dtype = dl_dtype(e->tensor.dtype);
  d.shape = e->shape.empty() ? nullptr : e->shape.data();
  d.strides = nullptr;  // row-major
  d.byte_offset = 0;
}

py::capsule export_capsule(const HostTensor& t, bool versioned, bool copy, int device_type, int device_id) {
  auto* e = new Export{t, t.shape};
  if (copy) {  // a host copy (only for host-addressable memory; the caller checks)
    HostTensor c = HostTensor::alloc(t.dtype, t.shape, false);
    if (t.size() > 0) std::memcpy(c.data, t.data, static_cast<size_t>(t.size()) * 4);
    e->tensor = std::move(c);
  }
  if (!versioned) {
    auto* m = new DLManagedTensor{};
    fill_tensor(m->dl_tensor, e, device_type, device_id);
    m->manager_ctx = e;
    m->deleter = &delete_export<DLManagedTensor>;
    return py::reinterpret_steal<py::capsule>(PyCapsule_New(m, "dltensor", &legacy_capsule_dtor));
  }
  auto* m = new DLManagedTensorVersioned{};
  m->version = {kVersionMajor, kVersionMinor};
  fill_tensor(m->dl_tensor, e, device_type, device_id);
  m->manager_ctx = e;
  m->deleter = &delete_export<DLManagedTensorVersioned>;
  m->flags = copy ? kFlagIsCopied : 0;
  return py::reinterpret_steal<py::capsule>(PyCapsule_New(m, "dltensor_versioned", &versioned_capsule_dtor));
}

// A producer's tensor seen through either struct, and how to give it back.
struct Imported {
  const DLTensor* t = nullptr;
  bool read_only = false;
  std::function<void()> release;  // calls the producer's deleter
};

std::string dtype_text(const DLDataType& d) {
  const char* kinds[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string k = d.code < 7 ? kinds[d.code] : "code " + std::to_string(d.code);
  return k + std::to_string(d.bits) + (d.lanes != 1 ? "x" + std::to_string(d.lanes) : "");
}

// em.from_dlpack's import (copy: -1 when allowed to, 0 never, 1 always).
HostTensor import_capsule(py::capsule cap, int copy) {
  Imported im;
  PyObject* c = cap.ptr();
  if (PyCapsule_IsValid(c, "dltensor_versioned")) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(c, "dltensor_versioned"));
    if (m->version.major != kVersionMajor)
      throw TypeError("em.from_dlpack: the producer's DLPack version " + std::to_string(m->version.major) + "." +
                      std::to_string(m->version.minor) + " is not 1.x");
    PyCapsule_SetName(c, "used_dltensor_versioned");
    im.t = &m->dl_tensor;
    im.read_only = (m->flags & kFlagReadOnly) != 0;
    im.release = [m] { if (m->deleter) m->deleter(m); };
  } else if (PyCapsule_IsValid(c, "dltensor")) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "dltensor"));
    PyCapsule_SetName(c, "used_dltensor");
    im.t = &m->dl_tensor;
    im.release = [m] { if (m->deleter) m->deleter(m); };
  } else {
    throw TypeError("em.from_dlpack: __dlpack__() returned no unused DLPack capsule");
  }
  // From here the producer's tensor is ours: released when the last em.Tensor over it goes, or
  // now when it is copied or refused.
  std::shared_ptr<void> keep(nullptr, [release = im.release](void*) {
    py::gil_scoped_acquire gil;  // NumPy's and PyTorch's deleters drop Python references
    release();
  });
  const DLTensor& d = *im.t;
  const int dev = d.device.device_type;
  if (dev != kDLCPU && dev != kDLCUDAHost && dev != kDLCUDAManaged)
    throw BackendError(std::string("em.from_dlpack: the tensor lives on DLPack device ") + std::to_string(dev) +
                       (dev == kDLCUDA ? " (kDLCUDA, device memory); em.Tensor memory is host-addressable, so only "
                                         "CPU, pinned (kDLCUDAHost) and managed (kDLCUDAManaged) tensors can be shared"
                                       : "; only CPU, pinned and managed memory can be shared"));
  DType t;
  bool words = true;
  if (d.dtype.lanes == 1 && d.dtype.bits == 32 && d.dtype.code == 2) t = DType::f32;
  else if (d.dtype.lanes == 1 && d.dtype.bits == 32 && d.dtype.code == 0) t = DType::i32;
  else if (d.dtype.lanes == 1 && d.dtype.bits == 32 && d.dtype.code == 1) t = DType::u32;
  else if (d.dtype.lanes == 1 && d.dtype.bits == 8 && d.dtype.code == 6) t = DType::boolean, words = false;
  else
    throw TypeError("em.from_dlpack: " + dtype_text(d.dtype) + " has no em dtype (f32, i32, u32 or bool); convert it "
                    "first, e.g. em.tensor(np.asarray(x), em.f32)");
  std::vector<int64_t> shape(d.shape, d.shape + d.ndim);
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 0) throw ShapeError("em.from_dlpack: negative dimension in the producer's shape");
    n *= s;
  }
  if (n > 2147483647) throw ShapeError("em.from_dlpack: " + std::to_string(n) + " elements; a tensor holds at most 2^31 - 1");
  // Row-major? (strides of size-1 axes do not matter; null strides are row-major.)
  bool dense = true;
  if (d.strides && n > 0) {
    int64_t expect = 1;
    for (int a = d.ndim - 1; a >= 0; --a) {
      if (shape[static_cast<size_t>(a)] != 1 && d.strides[a] != expect) dense = false;
      expect *= shape[static_cast<size_t>(a)];
    }
  }
  const char* base = static_cast<const char*>(d.data) + d.byte_offset;
  const bool must_copy = !words || !dense || im.read_only;
  if (must_copy && copy == 0)
    throw TypeError(std::string("em.from_dlpack: copy=False, but the tensor cannot be shared without a copy (") +
                    (!words ? "bool elements are bytes; em bool tensors hold 32-bit words"
                            : !dense ? "it is not row-major contiguous" : "the producer marked it read-only") + ")");
  if (!must_copy && copy != 1) {
    HostTensor h;
    h.dtype = t;
    h.shape = std::move(shape);
    h.data = reinterpret_cast<uint32_t*>(const_cast<char*>(base));
    h.owner = std::move(keep);
    return h;
  }
  HostTensor h = HostTensor::alloc(t, shape, false);
  std::vector<int64_t> idx(shape.size(), 0);
  const int64_t elem = words ? 4 : 1;
  for (int64_t i = 0; i < n; ++i) {  // element i of the row-major order, read through the strides
    int64_t off = 0, rest = i;
    for (int a = d.ndim - 1; a >= 0; --a) {
      const int64_t s = shape[static_cast<size_t>(a)];
      const int64_t k = s ? rest % s : 0;
      rest = s ? rest / s : 0;
      int64_t stride = 1;
      if (d.strides) stride = d.strides[a];
      else for (int b = a + 1; b < d.ndim; ++b) stride *= shape[static_cast<size_t>(b)];
      off += k * stride;
    }
    if (words) std::memcpy(&h.data[i], base + off * elem, 4);
    else h.data[i] = base[off] != 0 ? 1u : 0u;
  }
  return h;
}

}  // namespace

void bind_dlpack(py::module_& m) {
  m.def("_dlpack_export", &export_capsule, py::arg("tensor"), py::arg("versioned"), py::arg("copy"),
        py::arg("device_type"), py::arg("device_id"),
        "A DLPack capsule of the tensor's words (legacy or versioned; `copy`: of a host copy).");
  m.def("_dlpack_import", &import_capsule, py::arg("capsule"), py::arg("copy"),
        "An em.Tensor over a DLPack capsule's tensor (copy: -1 if needed, 0 never, 1 always).");
}

}  // namespace ember::python
