// The native tensor and global-state checker of the guards package.
//
// One `Checker` is built per generated guard function from the expected properties of every
// tensor the guard checks (exact Python class, dtype, device, layout, requires_grad, sizes
// and strides with chosen dimensions unchecked, raw dispatch key set) plus the expected
// global state (grad mode, default dtype, deterministic algorithms, autocast per device type)
// and the active backend (a ContextVar compared by identity). The generated Python guard
// calls `checker.check(t0, t1, ...)` once, with every tensor as a positional argument
// (METH_FASTCALL: no tuple, no Python objects built on the way), and gets True or False.
//
// The meaning of each property is the one of guards/reasons.py (`tensor_mismatch`,
// `stride_mismatch`, the global-state explainer): tests/guards/test_guards_agreement.py
// checks that this checker, the pure-Python generated code and the interpreted walk agree.
// Nothing is cached per tensor: every property, the key set included, is read on every call.
// Any C++ exception while reading a tensor (sizes of a nested tensor, strides of a sparse
// one, ...) is a failed check, as an exception is in the generated Python code.

#include <torch/csrc/python_headers.h>

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Layout.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <string>
#include <vector>

#ifndef GUARDS_NATIVE_KEY
#define GUARDS_NATIVE_KEY "unversioned"
#endif

namespace {

// A size or stride left unchecked (a dynamic dimension).
constexpr int64_t kAny = std::numeric_limits<int64_t>::min();

// The first property that differs, in the order of reasons.tensor_mismatch.
enum Failure : int {
  kOk = 0,
  kType,
  kUndefined,
  kDtype,
  kDevice,
  kLayout,
  kRequiresGrad,
  kRank,
  kSize,
  kStride,
  kPlacement,
  kKeys,
  kError,
};

const char* const kFailureNames[] = {
    nullptr, "type",  "undefined", "dtype",  "device",        "layout",
    "requires_grad", "rank", "size", "stride", "placement", "dispatch keys", "error",
};

struct TensorSpec {
  PyObject* cls = nullptr;  // strong reference; compared with Py_TYPE(obj) by identity
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  c10::Device device{c10::DeviceType::CPU};
  c10::Layout layout = c10::Layout::Strided;
  bool requires_grad = false;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  bool check_keys = false;
  uint64_t keys = 0;
  // Pinned placement (TensorMatch.placement): every stride, the storage offset, leafness.
  bool pinned = false;
  int64_t storage_offset = 0;
  bool is_leaf = false;
};

struct AutocastSpec {
  c10::DeviceType device_type;
  bool enabled;
  c10::ScalarType dtype;
};

struct StateSpec {
  int grad_enabled = -1;   // -1: unchecked, else 0/1
  int deterministic = -1;  // -1: unchecked, else 0/1
  bool check_default_dtype = false;
  c10::ScalarType default_dtype = c10::ScalarType::Undefined;
  bool check_autocast = false;
  std::vector<AutocastSpec> autocast;
  PyObject* backend_var = nullptr;  // strong reference to a ContextVar, or null
  uintptr_t backend_id = 0;         // id() of the expected active backend
};

// The reasons.stride_mismatch rule: strides at dimensions of size 1 never address memory,
// and no stride of a tensor with no elements does.
bool strides_match(const std::vector<int64_t>& expected, c10::IntArrayRef sizes,
                   c10::IntArrayRef strides) {
  if (strides.size() != expected.size()) {
    return false;
  }
  for (int64_t size : sizes) {
    if (size == 0) {
      return true;
    }
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] != kAny && sizes[i] != 1 && strides[i] != expected[i]) {
      return false;
    }
  }
  return true;
}

Failure check_tensor_unguarded(const TensorSpec& spec, PyObject* obj) {
  if (reinterpret_cast<PyObject*>(Py_TYPE(obj)) != spec.cls) {
    return kType;
  }
  const at::Tensor& tensor = THPVariable_Unpack(obj);
  if (!tensor.defined()) {
    return kUndefined;
  }
  if (tensor.scalar_type() != spec.dtype) {
    return kDtype;
  }
  if (tensor.device() != spec.device) {
    return kDevice;
  }
  if (tensor.layout() != spec.layout) {
    return kLayout;
  }
  if (tensor.requires_grad() != spec.requires_grad) {
    return kRequiresGrad;
  }
  c10::IntArrayRef sizes = tensor.sizes();
  if (sizes.size() != spec.sizes.size()) {
    return kRank;
  }
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (spec.sizes[i] != kAny && spec.sizes[i] != sizes[i]) {
      return kSize;
    }
  }
  if (spec.pinned) {
    if (tensor.strides() != c10::IntArrayRef(spec.strides)) {
      return kStride;
    }
    if (tensor.storage_offset() != spec.storage_offset || tensor.is_leaf() != spec.is_leaf) {
      return kPlacement;
    }
  } else if (!strides_match(spec.strides, sizes, tensor.strides())) {
    return kStride;
  }
  if (spec.check_keys && tensor.key_set().raw_repr() != spec.keys) {
    return kKeys;
  }
  return kOk;
}

Failure check_tensor(const TensorSpec& spec, PyObject* obj) {
  try {
    return check_tensor_unguarded(spec, obj);
  } catch (...) {
    // NOTE: a Python error raised under a C++ read (a subclass's size hook) may still be
    // set: the check has failed, and must not leave it behind.
    if (PyErr_Occurred() != nullptr) {
      PyErr_Clear();
    }
    return kError;
  }
}

// The first global-state property that differs (a name for messages), or null.
// Returns "error" with a Python exception set if the ContextVar could not be read.
const char* check_state(const StateSpec& state) {
  if (state.grad_enabled >= 0 && c10::GradMode::is_enabled() != (state.grad_enabled == 1)) {
    return "grad mode";
  }
  if (state.check_default_dtype &&
      c10::get_default_dtype_as_scalartype() != state.default_dtype) {
    return "default dtype";
  }
  if (state.deterministic >= 0 &&
      at::globalContext().deterministicAlgorithms() != (state.deterministic == 1)) {
    return "deterministic algorithms";
  }
  if (state.check_autocast) {
    for (const AutocastSpec& spec : state.autocast) {
      if (at::autocast::is_autocast_enabled(spec.device_type) != spec.enabled) {
        return "autocast state";
      }
      if (spec.enabled && at::autocast::get_autocast_dtype(spec.device_type) != spec.dtype) {
        return "autocast dtype";
      }
    }
  }
  if (state.backend_var != nullptr) {
    PyObject* active = nullptr;
    if (PyContextVar_Get(state.backend_var, Py_None, &active) < 0) {
      return "error";
    }
    const bool same = reinterpret_cast<uintptr_t>(active) == state.backend_id;
    Py_DECREF(active);
    if (!same) {
      return "backend";
    }
  }
  return nullptr;
}

struct CheckerObject {
  PyObject_HEAD
  std::vector<TensorSpec>* tensors;
  StateSpec* state;
};

// ---- building from Python values ------------------------------------------------------

bool parse_dims(PyObject* seq, std::vector<int64_t>& out, const char* what) {
  PyObject* fast = PySequence_Fast(seq, what);
  if (fast == nullptr) {
    return false;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  out.reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* item = PySequence_Fast_GET_ITEM(fast, i);
    if (item == Py_None) {
      out.push_back(kAny);
      continue;
    }
    const long long value = PyLong_AsLongLong(item);
    if (value == -1 && PyErr_Occurred()) {
      Py_DECREF(fast);
      return false;
    }
    out.push_back(static_cast<int64_t>(value));
  }
  Py_DECREF(fast);
  return true;
}

bool parse_bool(PyObject* obj, bool& out, const char* what) {
  if (!PyBool_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s must be a bool", what);
    return false;
  }
  out = obj == Py_True;
  return true;
}

bool parse_dtype(PyObject* obj, c10::ScalarType& out, const char* what) {
  if (!THPDtype_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s must be a torch.dtype", what);
    return false;
  }
  out = reinterpret_cast<THPDtype*>(obj)->scalar_type;
  return true;
}

// (cls, dtype, device, layout, requires_grad, sizes, strides, keys | None)
bool parse_tensor_spec(PyObject* item, TensorSpec& spec) {
  PyObject *cls, *dtype, *device, *layout, *requires_grad, *sizes, *strides, *keys;
  PyObject *offset = Py_None, *leaf = Py_None;
  if (!PyArg_ParseTuple(item, "OOOOOOOO|OO:tensor spec", &cls, &dtype, &device, &layout,
                        &requires_grad, &sizes, &strides, &keys, &offset, &leaf)) {
    return false;
  }
  if (!PyType_Check(cls) ||
      !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls),
                        reinterpret_cast<PyTypeObject*>(THPVariableClass))) {
    PyErr_SetString(PyExc_TypeError, "tensor spec: cls must be a torch.Tensor subclass");
    return false;
  }
  if (!parse_dtype(dtype, spec.dtype, "tensor spec: dtype")) {
    return false;
  }
  if (!THPDevice_Check(device)) {
    PyErr_SetString(PyExc_TypeError, "tensor spec: device must be a torch.device");
    return false;
  }
  spec.device = reinterpret_cast<THPDevice*>(device)->device;
  // NOTE: THPLayoutType is not exported by libtorch_python, so THPLayout_Check cannot be
  // linked: the type is recognized by its name.
  if (std::strcmp(Py_TYPE(layout)->tp_name, "torch.layout") != 0) {
    PyErr_SetString(PyExc_TypeError, "tensor spec: layout must be a torch.layout");
    return false;
  }
  spec.layout = reinterpret_cast<THPLayout*>(layout)->layout;
  if (!parse_bool(requires_grad, spec.requires_grad, "tensor spec: requires_grad") ||
      !parse_dims(sizes, spec.sizes, "tensor spec: sizes") ||
      !parse_dims(strides, spec.strides, "tensor spec: strides")) {
    return false;
  }
  if (spec.sizes.size() != spec.strides.size()) {
    PyErr_SetString(PyExc_ValueError, "tensor spec: sizes and strides differ in length");
    return false;
  }
  if (keys != Py_None) {
    const unsigned long long raw = PyLong_AsUnsignedLongLong(keys);
    if (PyErr_Occurred()) {
      return false;
    }
    spec.check_keys = true;
    spec.keys = static_cast<uint64_t>(raw);
  }
  if ((offset == Py_None) != (leaf == Py_None)) {
    PyErr_SetString(PyExc_ValueError, "tensor spec: storage offset and leafness go together");
    return false;
  }
  if (offset != Py_None) {
    spec.storage_offset = PyLong_AsLongLong(offset);
    if (PyErr_Occurred() || !parse_bool(leaf, spec.is_leaf, "tensor spec: is_leaf")) {
      return false;
    }
    for (int64_t stride : spec.strides) {
      if (stride == kAny) {
        PyErr_SetString(PyExc_ValueError, "tensor spec: a pinned tensor has every stride");
        return false;
      }
    }
    spec.pinned = true;
  }
  Py_INCREF(cls);
  spec.cls = cls;
  return true;
}

bool parse_optional_flag(PyObject* obj, int& out, const char* what) {
  if (obj == Py_None) {
    out = -1;
    return true;
  }
  bool value = false;
  if (!parse_bool(obj, value, what)) {
    return false;
  }
  out = value ? 1 : 0;
  return true;
}

// (grad_enabled | None, default_dtype | None, deterministic | None,
//  ((device_type: str, enabled: bool, dtype), ...) | None)
bool parse_state(PyObject* item, StateSpec& state) {
  PyObject *grad, *default_dtype, *deterministic, *autocast;
  if (!PyArg_ParseTuple(item, "OOOO:state spec", &grad, &default_dtype, &deterministic,
                        &autocast)) {
    return false;
  }
  if (!parse_optional_flag(grad, state.grad_enabled, "state: grad_enabled") ||
      !parse_optional_flag(deterministic, state.deterministic, "state: deterministic")) {
    return false;
  }
  if (default_dtype != Py_None) {
    state.check_default_dtype = true;
    if (!parse_dtype(default_dtype, state.default_dtype, "state: default_dtype")) {
      return false;
    }
  }
  if (autocast == Py_None) {
    return true;
  }
  state.check_autocast = true;
  PyObject* fast = PySequence_Fast(autocast, "state: autocast must be a sequence");
  if (fast == nullptr) {
    return false;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < n; ++i) {
    const char* device = nullptr;
    PyObject *enabled, *dtype;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fast, i), "sOO:autocast spec", &device,
                          &enabled, &dtype)) {
      Py_DECREF(fast);
      return false;
    }
    AutocastSpec spec{c10::DeviceType::CPU, false, c10::ScalarType::Undefined};
    try {
      spec.device_type = c10::Device(std::string(device)).type();
    } catch (const std::exception&) {
      PyErr_Format(PyExc_ValueError, "autocast spec: bad device type '%s'", device);
      Py_DECREF(fast);
      return false;
    }
    if (!parse_bool(enabled, spec.enabled, "autocast spec: enabled") ||
        !parse_dtype(dtype, spec.dtype, "autocast spec: dtype")) {
      Py_DECREF(fast);
      return false;
    }
    state.autocast.push_back(spec);
  }
  Py_DECREF(fast);
  return true;
}

// (context_var, expected_id: int)
bool parse_backend(PyObject* item, StateSpec& state) {
  PyObject* var;
  PyObject* expected;
  if (!PyArg_ParseTuple(item, "OO:backend spec", &var, &expected)) {
    return false;
  }
  if (!PyContextVar_CheckExact(var)) {
    PyErr_SetString(PyExc_TypeError, "backend spec: expected a contextvars.ContextVar");
    return false;
  }
  const unsigned long long raw = PyLong_AsUnsignedLongLong(expected);
  if (PyErr_Occurred()) {
    return false;
  }
  state.backend_id = static_cast<uintptr_t>(raw);
  Py_INCREF(var);
  state.backend_var = var;
  return true;
}

void release_specs(CheckerObject* self) {
  if (self->tensors != nullptr) {
    for (TensorSpec& spec : *self->tensors) {
      Py_XDECREF(spec.cls);
    }
    delete self->tensors;
    self->tensors = nullptr;
  }
  if (self->state != nullptr) {
    Py_XDECREF(self->state->backend_var);
    delete self->state;
    self->state = nullptr;
  }
}

PyObject* checker_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"tensors", "state", "backend", nullptr};
  PyObject* tensors = nullptr;
  PyObject* state = Py_None;
  PyObject* backend = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:Checker", const_cast<char**>(kwlist),
                                   &tensors, &state, &backend)) {
    return nullptr;
  }
  auto* self = reinterpret_cast<CheckerObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) {
    return nullptr;
  }
  self->tensors = new (std::nothrow) std::vector<TensorSpec>();
  self->state = new (std::nothrow) StateSpec();
  if (self->tensors == nullptr || self->state == nullptr) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  PyObject* fast = PySequence_Fast(tensors, "Checker: tensors must be a sequence");
  if (fast == nullptr) {
    Py_DECREF(self);
    return nullptr;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  self->tensors->reserve(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    self->tensors->emplace_back();
    if (!parse_tensor_spec(PySequence_Fast_GET_ITEM(fast, i), self->tensors->back())) {
      Py_DECREF(fast);
      Py_DECREF(self);
      return nullptr;
    }
  }
  Py_DECREF(fast);
  if ((state != Py_None && !parse_state(state, *self->state)) ||
      (backend != Py_None && !parse_backend(backend, *self->state))) {
    Py_DECREF(self);
    return nullptr;
  }
  return reinterpret_cast<PyObject*>(self);
}

// The checker holds classes and a ContextVar: it takes part in garbage collection, so that
// a cycle through it (a class whose attributes reach a guard using it) can be collected.
int checker_traverse(PyObject* obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<CheckerObject*>(obj);
  if (self->tensors != nullptr) {
    for (const TensorSpec& spec : *self->tensors) {
      Py_VISIT(spec.cls);
    }
  }
  if (self->state != nullptr) {
    Py_VISIT(self->state->backend_var);
  }
  return 0;
}

int checker_clear(PyObject* obj) {
  auto* self = reinterpret_cast<CheckerObject*>(obj);
  if (self->tensors != nullptr) {
    for (TensorSpec& spec : *self->tensors) {
      Py_CLEAR(spec.cls);
    }
  }
  if (self->state != nullptr) {
    Py_CLEAR(self->state->backend_var);
  }
  return 0;
}

void checker_dealloc(PyObject* obj) {
  PyObject_GC_UnTrack(obj);
  release_specs(reinterpret_cast<CheckerObject*>(obj));
  Py_TYPE(obj)->tp_free(obj);
}

// check(t0, t1, ...) -> bool: the global state and backend, then tensor i against spec i.
PyObject* checker_check(PyObject* obj, PyObject* const* args, Py_ssize_t nargs) {
  auto* self = reinterpret_cast<CheckerObject*>(obj);
  const std::vector<TensorSpec>& tensors = *self->tensors;
  if (static_cast<size_t>(nargs) != tensors.size()) {
    PyErr_Format(PyExc_TypeError, "Checker.check takes %zu tensors (%zd given)",
                 tensors.size(), nargs);
    return nullptr;
  }
  const char* state_failure = check_state(*self->state);
  if (state_failure != nullptr) {
    if (PyErr_Occurred()) {
      return nullptr;
    }
    Py_RETURN_FALSE;
  }
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    if (check_tensor(tensors[static_cast<size_t>(i)], args[i]) != kOk) {
      Py_RETURN_FALSE;
    }
  }
  Py_RETURN_TRUE;
}

// first_failure(index, tensor) -> str | None: the first property of `tensor` that differs
// from spec `index` ("dtype", "size", "dispatch keys", ...), None if it matches.
PyObject* checker_first_failure(PyObject* obj, PyObject* args) {
  auto* self = reinterpret_cast<CheckerObject*>(obj);
  Py_ssize_t index = 0;
  PyObject* tensor = nullptr;
  if (!PyArg_ParseTuple(args, "nO:first_failure", &index, &tensor)) {
    return nullptr;
  }
  if (index < 0 || static_cast<size_t>(index) >= self->tensors->size()) {
    PyErr_SetString(PyExc_IndexError, "first_failure: no such tensor spec");
    return nullptr;
  }
  const Failure failure = check_tensor((*self->tensors)[static_cast<size_t>(index)], tensor);
  if (failure == kOk) {
    Py_RETURN_NONE;
  }
  return PyUnicode_FromString(kFailureNames[failure]);
}

// state_failure() -> str | None: the first global-state property that differs, or None.
PyObject* checker_state_failure(PyObject* obj, PyObject* /*unused*/) {
  auto* self = reinterpret_cast<CheckerObject*>(obj);
  const char* failure = check_state(*self->state);
  if (failure == nullptr) {
    Py_RETURN_NONE;
  }
  if (PyErr_Occurred()) {
    return nullptr;
  }
  return PyUnicode_FromString(failure);
}

PyObject* checker_len(PyObject* obj, PyObject* /*unused*/) {
  return PyLong_FromSize_t(reinterpret_cast<CheckerObject*>(obj)->tensors->size());
}

PyMethodDef checker_methods[] = {
    {"check", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(checker_check)),
     METH_FASTCALL,
     "check(t0, t1, ...) -> bool: global state, backend, and tensor i against spec i."},
    {"first_failure", checker_first_failure, METH_VARARGS,
     "first_failure(index, tensor) -> str | None: the first property that differs."},
    {"state_failure", checker_state_failure, METH_NOARGS,
     "state_failure() -> str | None: the first global-state property that differs."},
    {"num_tensors", checker_len, METH_NOARGS, "How many tensor specs the checker holds."},
    {nullptr, nullptr, 0, nullptr},
};

PyTypeObject CheckerType = {
    PyVarObject_HEAD_INIT(nullptr, 0)
};

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "_guards_native",
    "Native tensor and global-state checks for generated guards.",
    -1,
    nullptr,
};

}  // namespace

// Defined in snapshot.cpp, which build.py appends to this file.
bool add_snapshot_type(PyObject* module);

PyMODINIT_FUNC PyInit__guards_native() {
  CheckerType.tp_name = "_guards_native.Checker";
  CheckerType.tp_basicsize = sizeof(CheckerObject);
  CheckerType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  CheckerType.tp_traverse = checker_traverse;
  CheckerType.tp_clear = checker_clear;
  CheckerType.tp_doc =
      "Checker(tensors, state=None, backend=None): expected tensor properties and state.";
  CheckerType.tp_new = checker_new;
  CheckerType.tp_dealloc = checker_dealloc;
  CheckerType.tp_methods = checker_methods;
  if (PyType_Ready(&CheckerType) < 0) {
    return nullptr;
  }
  PyObject* module = PyModule_Create(&module_def);
  if (module == nullptr) {
    return nullptr;
  }
  Py_INCREF(&CheckerType);
  if (PyModule_AddObject(module, "Checker", reinterpret_cast<PyObject*>(&CheckerType)) < 0 ||
      PyModule_AddStringConstant(module, "BUILD_KEY", GUARDS_NATIVE_KEY) < 0) {
    Py_DECREF(&CheckerType);
    Py_DECREF(module);
    return nullptr;
  }
  if (!add_snapshot_type(module)) {
    Py_DECREF(module);
    return nullptr;
  }
  return module;
}
