// Snapshots: the object-state part of a guard checked by dict versions instead of polling.
//
// (Appended to checker.cpp by build.py: one translation unit, so TensorSpec, check_tensor and
// parse_tensor_spec of checker.cpp are in scope.)
//
// A region is a subtree of a guard rooted at an object pinned by identity (a module checked
// with `L['self'] is obj`). Everything its checks read is reached from the root by plain
// reads: an attribute found in an instance `__dict__` or, missing there, a plain value of its
// class (no descriptor: fixed by the instance dict's version and the class's version tag),
// the `__dict__` itself, an item of a dict. `Snapshot.arm()` walks each region's program and
// records, in order:
// - for every object whose attributes are read: its exact type, the type's version tag
//   (`tp_version_tag`, reset by CPython on any change to the class or its bases), and its
//   instance dict with that dict's version (`ma_version_tag`, which CPython gives a fresh,
//   never reused value on every mutation of that dict);
// - for every other dict read from (`_modules`, `_parameters`, hook tables): its version;
// - for every object whose type a check reads: its type;
// - every tensor, with the spec of its TensorMatch.
// Versions are read before the items they cover, so a change made while arming shows later
// as a changed version. `commit(token)` makes the records valid; the caller commits only
// after the full Python guard passed on the state armed (arm first, then check: a change
// made in between changes a version, so it is never taken for checked).
// `check()` is then: every record's type, tag, dict identity and version unchanged, and every
// tensor's metadata matches its spec. Unchanged dicts hold the same objects, so every check
// of the region that depends only on identities, immutable constants, dict contents and
// types still holds; tensor metadata is read anew on every call, as in the Checker.
//
// Python 3.14 has no dict version tags: there the module reports SNAPSHOTS = False and the
// generated guards keep polling.

#if PY_VERSION_HEX < 0x030E0000
#define GUARDS_HAVE_DICT_VERSIONS 1
#else
#define GUARDS_HAVE_DICT_VERSIONS 0
#endif

namespace {

// The kinds of steps of a region program.
// kClassAttr: an attribute its object's instance dict lacks, read from a class along the MRO
// (a value that is no descriptor); the object's record (type, version tag, instance dict
// version) keeps it fixed.
enum StepKind : int { kAttr = 0, kInstanceDict = 1, kItem = 2, kClassAttr = 3 };

// What a value of the program needs (bit flags, set by guards/snapshot.py).
enum Needs : int {
  kNeedObject = 1,       // attributes read through its instance dict: type, tag, dict version
  kNeedType = 2,         // its exact type is checked
  kNeedDict = 4,         // a dict or OrderedDict read by key, length or membership: version
  kNeedExactDict = 8,    // an exact dict (its key order is read): version
  kNeedTensor = 16,      // a tensor checked against spec `tensor`
  kNeedLength = 32,      // its length is checked: a versioned dict, or an immutable tuple or str
};

struct Step {
  int parent = 0;
  int kind = kAttr;
  PyObject* key = nullptr;  // strong: the attribute name (str) or the item key (str or int)
  int needs = 0;
  int tensor = -1;
};

struct Region {
  PyObject* root = nullptr;  // strong
  int root_needs = 0;
  int root_tensor = -1;
  std::vector<Step> steps;
};

struct ObjectRecord {
  PyObject* obj;      // strong
  PyObject* type;     // strong
  unsigned int tag;
  PyObject* dict;     // strong
  uint64_t version;
};

struct DictRecord {
  PyObject* dict;  // strong
  uint64_t version;
};

struct TypeRecord {
  PyObject* obj;   // strong
  PyObject* type;  // strong
};

struct TensorRecord {
  PyObject* obj;  // strong
  size_t spec;
};

struct Records {
  std::vector<ObjectRecord> objects;
  std::vector<DictRecord> dicts;
  std::vector<TypeRecord> types;
  std::vector<TensorRecord> tensors;
};

enum State : int { kDisarmed = 0, kPending = 1, kValid = 2 };

struct SnapshotObject {
  PyObject_HEAD
  std::vector<Region>* regions;
  std::vector<TensorSpec>* specs;
  Records* records;
  int state;
  uint64_t generation;
};

uint64_t dict_version(PyObject* dict) {
#if GUARDS_HAVE_DICT_VERSIONS
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return reinterpret_cast<PyDictObject*>(dict)->ma_version_tag;
#pragma GCC diagnostic pop
#else
  (void)dict;
  return 0;
#endif
}

PyObject* ordered_dict_type() {
  static PyObject* cls = nullptr;
  if (cls == nullptr) {
    PyObject* collections = PyImport_ImportModule("collections");
    if (collections == nullptr) {
      return nullptr;
    }
    cls = PyObject_GetAttrString(collections, "OrderedDict");  // NOTE: kept for good
    Py_DECREF(collections);
  }
  return cls;
}

// The class attribute `name` of `type` along its MRO (borrowed, or null); assigns the type a
// version tag as a side effect. Never called without dict versions (arm() returns first).
PyObject* class_lookup(PyTypeObject* type, PyObject* name) {
#if GUARDS_HAVE_DICT_VERSIONS
  return _PyType_Lookup(type, name);
#else
  (void)type;
  (void)name;
  return nullptr;
#endif
}

bool is_dict_like(PyObject* obj) {
  PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(obj));
  return PyDict_CheckExact(obj) || (type == ordered_dict_type());
}

void clear_records(Records& records) {
  for (ObjectRecord& r : records.objects) {
    Py_DECREF(r.obj);
    Py_DECREF(r.type);
    Py_DECREF(r.dict);
  }
  for (DictRecord& r : records.dicts) {
    Py_DECREF(r.dict);
  }
  for (TypeRecord& r : records.types) {
    Py_DECREF(r.obj);
    Py_DECREF(r.type);
  }
  for (TensorRecord& r : records.tensors) {
    Py_DECREF(r.obj);
  }
  records.objects.clear();
  records.dicts.clear();
  records.types.clear();
  records.tensors.clear();
}

// The attribute lookup of `type` for `name` (borrowed, or null), assigning the type a version
// tag as a side effect.
PyObject* type_lookup(PyTypeObject* type, const char* name) {
  PyObject* key = PyUnicode_InternFromString(name);
  if (key == nullptr) {
    return nullptr;
  }
  PyObject* found = class_lookup(type, key);
  Py_DECREF(key);
  return found;
}

// Record an object whose attributes are read from its instance dict: its type must look
// attributes up the generic way (object.__getattribute__), and have a version tag.
bool record_object(Records& records, PyObject* obj, PyObject** dict_out) {
  PyTypeObject* type = Py_TYPE(obj);
  static PyObject* generic = nullptr;
  if (generic == nullptr) {
    generic = type_lookup(&PyBaseObject_Type, "__getattribute__");
    if (generic == nullptr) {
      return false;
    }
    Py_INCREF(generic);
  }
  if (type_lookup(type, "__getattribute__") != generic) {
    return false;
  }
  const unsigned int tag = type->tp_version_tag;
  if (tag == 0 || type->tp_dictoffset == 0) {
    return false;
  }
  PyObject* dict = PyObject_GenericGetDict(obj, nullptr);
  if (dict == nullptr) {
    return false;
  }
  if (!PyDict_CheckExact(dict)) {
    Py_DECREF(dict);
    return false;
  }
  Py_INCREF(obj);
  Py_INCREF(reinterpret_cast<PyObject*>(type));
  records.objects.push_back({obj, reinterpret_cast<PyObject*>(type), tag, dict,
                             dict_version(dict)});
  *dict_out = dict;
  return true;
}

// An attribute `name` of an object recorded with `record_object` is its instance dict's
// entry when the class has no data descriptor of that name.
bool plain_attribute(PyObject* obj, PyObject* name) {
  PyObject* found = class_lookup(Py_TYPE(obj), name);
  return found == nullptr || Py_TYPE(found)->tp_descr_set == nullptr;
}

bool record_dict(Records& records, PyObject* obj, bool exact) {
  if (exact ? !PyDict_CheckExact(obj) : !is_dict_like(obj)) {
    return false;
  }
  Py_INCREF(obj);
  records.dicts.push_back({obj, dict_version(obj)});
  return true;
}

// Record what `needs` asks of `value` (the instance dict of an object, `own_dict`, is
// versioned by its object's record already).
bool record_value(SnapshotObject* self, PyObject* value, int needs, int tensor,
                  bool own_dict, PyObject** instance_dict) {
  Records& records = *self->records;
  if (needs & kNeedObject) {
    if (!record_object(records, value, instance_dict)) {
      return false;
    }
  }
  if (needs & kNeedType) {
    Py_INCREF(value);
    Py_INCREF(reinterpret_cast<PyObject*>(Py_TYPE(value)));
    records.types.push_back({value, reinterpret_cast<PyObject*>(Py_TYPE(value))});
  }
  if (!own_dict && (needs & (kNeedDict | kNeedExactDict))) {
    if (!record_dict(records, value, (needs & kNeedExactDict) != 0)) {
      return false;
    }
  }
  if ((needs & kNeedLength) && !own_dict && !(needs & (kNeedDict | kNeedExactDict)) &&
      !PyTuple_CheckExact(value) && !PyUnicode_CheckExact(value) &&
      !record_dict(records, value, false)) {
    return false;  // NOTE: a length is fixed by a dict's version, or by immutability
  }
  if (needs & kNeedTensor) {
    if (tensor < 0 || static_cast<size_t>(tensor) >= self->specs->size() ||
        check_tensor((*self->specs)[static_cast<size_t>(tensor)], value) == kError) {
      return false;
    }
    Py_INCREF(value);
    records.tensors.push_back({value, static_cast<size_t>(tensor)});
  }
  return true;
}

// Walk one region's program from its root, recording what each value needs. Values are
// held strongly while walking.
bool arm_region(SnapshotObject* self, const Region& region) {
  std::vector<PyObject*> values;
  std::vector<PyObject*> dicts;  // instance dict of value i, if recorded (borrowed: records)
  values.reserve(region.steps.size() + 1);
  dicts.reserve(region.steps.size() + 1);
  Py_INCREF(region.root);
  values.push_back(region.root);
  dicts.push_back(nullptr);
  bool ok = record_value(self, region.root, region.root_needs, region.root_tensor, false,
                         &dicts[0]);
  for (size_t i = 0; ok && i < region.steps.size(); ++i) {
    const Step& step = region.steps[i];
    PyObject* parent = values[static_cast<size_t>(step.parent)];
    PyObject* parent_dict = dicts[static_cast<size_t>(step.parent)];
    PyObject* value = nullptr;
    if (step.kind == kClassAttr) {
      if (parent_dict == nullptr) {
        ok = false;
        break;
      }
      if (PyDict_GetItemWithError(parent_dict, step.key) != nullptr || PyErr_Occurred()) {
        ok = false;  // NOTE: the instance dict shadows the class attribute now
        break;
      }
      value = class_lookup(Py_TYPE(parent), step.key);
      if (value != nullptr && Py_TYPE(value)->tp_descr_get != nullptr) {
        ok = false;  // NOTE: a descriptor: the read binds or computes a new object
        break;
      }
    } else if (step.kind == kInstanceDict || step.kind == kAttr) {
      if (parent_dict == nullptr) {
        ok = false;  // NOTE: the program reads attributes of a value it did not record
        break;
      }
      if (step.kind == kInstanceDict) {
        PyObject* descr = class_lookup(Py_TYPE(parent), step.key);
        if (descr == nullptr || Py_TYPE(descr) != &PyGetSetDescr_Type) {
          ok = false;
          break;
        }
        value = parent_dict;
      } else {
        if (!plain_attribute(parent, step.key)) {
          ok = false;
          break;
        }
        value = PyDict_GetItemWithError(parent_dict, step.key);
      }
    } else {
      if (!is_dict_like(parent)) {
        ok = false;
        break;
      }
      value = PyDict_GetItemWithError(parent, step.key);
    }
    if (value == nullptr) {
      ok = false;
      break;
    }
    Py_INCREF(value);
    values.push_back(value);
    dicts.push_back(nullptr);
    ok = record_value(self, value, step.needs, step.tensor, step.kind == kInstanceDict,
                      &dicts.back());
  }
  for (PyObject* value : values) {
    Py_DECREF(value);
  }
  return ok;
}

// ---- Python methods -----------------------------------------------------------------------

// arm() -> int: a token for commit(), or 0 if the regions cannot be snapshotted as they are.
PyObject* snapshot_arm(PyObject* obj, PyObject* /*unused*/) {
  auto* self = reinterpret_cast<SnapshotObject*>(obj);
  clear_records(*self->records);
  self->state = kDisarmed;
  if (!GUARDS_HAVE_DICT_VERSIONS) {
    return PyLong_FromLong(0);
  }
  for (const Region& region : *self->regions) {
    if (!arm_region(self, region)) {
      if (PyErr_Occurred() != nullptr) {
        PyErr_Clear();
      }
      clear_records(*self->records);
      return PyLong_FromLong(0);
    }
  }
  self->state = kPending;
  self->generation += 1;
  return PyLong_FromUnsignedLongLong(self->generation);
}

// commit(token): the records armed with `token` become valid (another arm since: nothing).
PyObject* snapshot_commit(PyObject* obj, PyObject* arg) {
  auto* self = reinterpret_cast<SnapshotObject*>(obj);
  const unsigned long long token = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred() != nullptr) {
    return nullptr;
  }
  if (self->state == kPending && token != 0 && token == self->generation) {
    self->state = kValid;
  }
  Py_RETURN_NONE;
}

// disarm(): forget the records (and release what they hold).
PyObject* snapshot_disarm(PyObject* obj, PyObject* /*unused*/) {
  auto* self = reinterpret_cast<SnapshotObject*>(obj);
  clear_records(*self->records);
  self->state = kDisarmed;
  self->generation += 1;
  Py_RETURN_NONE;
}

bool records_hold(SnapshotObject* self) {
  const Records& records = *self->records;
  for (const ObjectRecord& r : records.objects) {
    PyTypeObject* type = reinterpret_cast<PyTypeObject*>(r.type);
    if (reinterpret_cast<PyObject*>(Py_TYPE(r.obj)) != r.type || type->tp_version_tag != r.tag) {
      return false;
    }
    PyObject* dict = PyObject_GenericGetDict(r.obj, nullptr);
    if (dict == nullptr) {
      PyErr_Clear();
      return false;
    }
    const bool same = dict == r.dict;
    Py_DECREF(dict);
    if (!same || dict_version(r.dict) != r.version) {
      return false;
    }
  }
  for (const DictRecord& r : records.dicts) {
    if (dict_version(r.dict) != r.version) {
      return false;
    }
  }
  for (const TypeRecord& r : records.types) {
    if (reinterpret_cast<PyObject*>(Py_TYPE(r.obj)) != r.type) {
      return false;
    }
  }
  const std::vector<TensorSpec>& specs = *self->specs;
  for (const TensorRecord& r : records.tensors) {
    if (check_tensor(specs[r.spec], r.obj) != kOk) {
      return false;
    }
  }
  return true;
}

// check() -> bool: committed records that all still hold.
PyObject* snapshot_check(PyObject* obj, PyObject* /*unused*/) {
  auto* self = reinterpret_cast<SnapshotObject*>(obj);
  if (self->state == kValid && records_hold(self)) {
    Py_RETURN_TRUE;
  }
  Py_RETURN_FALSE;
}

PyObject* snapshot_counts(PyObject* obj, PyObject* /*unused*/) {
  auto* self = reinterpret_cast<SnapshotObject*>(obj);
  const Records& r = *self->records;
  return Py_BuildValue("{s:n,s:n,s:n,s:n,s:i}", "objects", r.objects.size(), "dicts",
                       r.dicts.size(), "types", r.types.size(), "tensors", r.tensors.size(),
                       "state", self->state);
}

// ---- building -----------------------------------------------------------------------------

bool parse_step(PyObject* item, Step& step) {
  PyObject* key = nullptr;
  if (!PyArg_ParseTuple(item, "iiOii:snapshot step", &step.parent, &step.kind, &key,
                        &step.needs, &step.tensor)) {
    return false;
  }
  if (step.kind < kAttr || step.kind > kClassAttr) {
    PyErr_SetString(PyExc_ValueError, "snapshot step: bad kind");
    return false;
  }
  const bool str_key = PyUnicode_CheckExact(key);
  if (!(str_key || (step.kind == kItem && PyLong_CheckExact(key)))) {
    PyErr_SetString(PyExc_TypeError, "snapshot step: keys are str (or int items)");
    return false;
  }
  if (str_key) {
    Py_INCREF(key);
    PyUnicode_InternInPlace(&key);
  } else {
    Py_INCREF(key);
  }
  step.key = key;
  return true;
}

// (root, root_needs, root_tensor, ((parent, kind, key, needs, tensor), ...))
bool parse_region(PyObject* item, Region& region, size_t n_specs) {
  PyObject* root = nullptr;
  PyObject* steps = nullptr;
  if (!PyArg_ParseTuple(item, "OiiO:snapshot region", &root, &region.root_needs,
                        &region.root_tensor, &steps)) {
    return false;
  }
  Py_INCREF(root);
  region.root = root;
  PyObject* fast = PySequence_Fast(steps, "snapshot region: steps must be a sequence");
  if (fast == nullptr) {
    return false;
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
  for (Py_ssize_t i = 0; i < n; ++i) {
    region.steps.emplace_back();
    Step& step = region.steps.back();
    if (!parse_step(PySequence_Fast_GET_ITEM(fast, i), step)) {
      Py_DECREF(fast);
      return false;
    }
    if (step.parent < 0 || step.parent > static_cast<int>(i) ||
        ((step.needs & kNeedTensor) && (step.tensor < 0 || static_cast<size_t>(step.tensor) >=
                                                             n_specs))) {
      PyErr_SetString(PyExc_ValueError, "snapshot step: bad parent or tensor index");
      Py_DECREF(fast);
      return false;
    }
  }
  Py_DECREF(fast);
  return true;
}

void release_snapshot(SnapshotObject* self) {
  if (self->records != nullptr) {
    clear_records(*self->records);
    delete self->records;
    self->records = nullptr;
  }
  if (self->regions != nullptr) {
    for (Region& region : *self->regions) {
      Py_XDECREF(region.root);
      for (Step& step : region.steps) {
        Py_XDECREF(step.key);
      }
    }
    delete self->regions;
    self->regions = nullptr;
  }
  if (self->specs != nullptr) {
    for (TensorSpec& spec : *self->specs) {
      Py_XDECREF(spec.cls);
    }
    delete self->specs;
    self->specs = nullptr;
  }
}

PyObject* snapshot_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"regions", "tensors", nullptr};
  PyObject* regions = nullptr;
  PyObject* tensors = nullptr;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:Snapshot", const_cast<char**>(kwlist),
                                   &regions, &tensors)) {
    return nullptr;
  }
  auto* self = reinterpret_cast<SnapshotObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) {
    return nullptr;
  }
  self->regions = new (std::nothrow) std::vector<Region>();
  self->specs = new (std::nothrow) std::vector<TensorSpec>();
  self->records = new (std::nothrow) Records();
  self->state = kDisarmed;
  self->generation = 0;
  if (self->regions == nullptr || self->specs == nullptr || self->records == nullptr) {
    Py_DECREF(self);
    return PyErr_NoMemory();
  }
  PyObject* fast = PySequence_Fast(tensors, "Snapshot: tensors must be a sequence");
  if (fast == nullptr) {
    Py_DECREF(self);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); ++i) {
    self->specs->emplace_back();
    if (!parse_tensor_spec(PySequence_Fast_GET_ITEM(fast, i), self->specs->back())) {
      Py_DECREF(fast);
      Py_DECREF(self);
      return nullptr;
    }
  }
  Py_DECREF(fast);
  fast = PySequence_Fast(regions, "Snapshot: regions must be a sequence");
  if (fast == nullptr) {
    Py_DECREF(self);
    return nullptr;
  }
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast); ++i) {
    self->regions->emplace_back();
    if (!parse_region(PySequence_Fast_GET_ITEM(fast, i), self->regions->back(),
                      self->specs->size())) {
      Py_DECREF(fast);
      Py_DECREF(self);
      return nullptr;
    }
  }
  Py_DECREF(fast);
  return reinterpret_cast<PyObject*>(self);
}

int snapshot_traverse(PyObject* obj, visitproc visit, void* arg) {
  auto* self = reinterpret_cast<SnapshotObject*>(obj);
  if (self->regions != nullptr) {
    for (const Region& region : *self->regions) {
      Py_VISIT(region.root);
    }
  }
  if (self->specs != nullptr) {
    for (const TensorSpec& spec : *self->specs) {
      Py_VISIT(spec.cls);
    }
  }
  if (self->records != nullptr) {
    const Records& r = *self->records;
    for (const ObjectRecord& o : r.objects) {
      Py_VISIT(o.obj);
      Py_VISIT(o.type);
      Py_VISIT(o.dict);
    }
    for (const DictRecord& d : r.dicts) {
      Py_VISIT(d.dict);
    }
    for (const TypeRecord& t : r.types) {
      Py_VISIT(t.obj);
      Py_VISIT(t.type);
    }
    for (const TensorRecord& t : r.tensors) {
      Py_VISIT(t.obj);
    }
  }
  return 0;
}

int snapshot_clear(PyObject* obj) {
  auto* self = reinterpret_cast<SnapshotObject*>(obj);
  if (self->records != nullptr) {
    clear_records(*self->records);
  }
  self->state = kDisarmed;
  if (self->regions != nullptr) {
    for (Region& region : *self->regions) {
      Py_CLEAR(region.root);
    }
  }
  return 0;
}

void snapshot_dealloc(PyObject* obj) {
  PyObject_GC_UnTrack(obj);
  release_snapshot(reinterpret_cast<SnapshotObject*>(obj));
  Py_TYPE(obj)->tp_free(obj);
}

PyMethodDef snapshot_methods[] = {
    {"arm", snapshot_arm, METH_NOARGS,
     "arm() -> int: record the regions' state; a token for commit(), 0 if not possible."},
    {"commit", snapshot_commit, METH_O,
     "commit(token): make the records of arm() valid (after the full guard passed)."},
    {"disarm", snapshot_disarm, METH_NOARGS, "disarm(): forget the records."},
    {"check", snapshot_check, METH_NOARGS,
     "check() -> bool: valid records whose types, tags, dicts and tensors all still hold."},
    {"counts", snapshot_counts, METH_NOARGS, "counts() -> dict: what the records hold."},
    {nullptr, nullptr, 0, nullptr},
};

PyTypeObject SnapshotType = {
    PyVarObject_HEAD_INIT(nullptr, 0)
};

}  // namespace

bool add_snapshot_type(PyObject* module) {
  SnapshotType.tp_name = "_guards_native.Snapshot";
  SnapshotType.tp_basicsize = sizeof(SnapshotObject);
  SnapshotType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
  SnapshotType.tp_traverse = snapshot_traverse;
  SnapshotType.tp_clear = snapshot_clear;
  SnapshotType.tp_doc = "Snapshot(regions, tensors): versioned records of guarded objects.";
  SnapshotType.tp_new = snapshot_new;
  SnapshotType.tp_dealloc = snapshot_dealloc;
  SnapshotType.tp_methods = snapshot_methods;
  if (PyType_Ready(&SnapshotType) < 0) {
    return false;
  }
  Py_INCREF(&SnapshotType);
  if (PyModule_AddObject(module, "Snapshot", reinterpret_cast<PyObject*>(&SnapshotType)) < 0) {
    Py_DECREF(&SnapshotType);
    return false;
  }
  return PyModule_AddIntConstant(module, "SNAPSHOTS", GUARDS_HAVE_DICT_VERSIONS) == 0;
}
