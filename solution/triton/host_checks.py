"""Compiled argument checks: an opt-in for callers whose host time per call matters (a serving
engine running prefill or decode eagerly, docs/serving.md).

The entry points that check their tensors in one pass (shared.fitting_pointers: kernel() of
decode and of prefill, pooled_decode, pooled_prefill, and MTP's calls through
shared.pooled_pointers) check, for each argument, that it is a torch.Tensor of the expected
shape and dtype on q's device, contiguous, and then take its data pointer. In Python that costs
6-13 µs a call for prefill's eleven tensors, most of it in torch's attribute getters (docs/perf.md
item 33); by default a call whose tensors
are laid out as an earlier call's has them confirmed by torch's compiled tensor guards instead
(tensor_guards: about 3 µs with the pointers, docs/perf.md item 35). The same checks in C++, on
the tensors' own fields, cost 1-2 µs. They need a C++ compiler, ninja and torch's headers, and a
build of 10-30 s the first time (26 s on two cores, 10-12 s on a GPU host's sixteen;
torch.utils.cpp_extension caches it on disk: later processes load it in well under a second),
so they are not the default:

    from solution.triton import host_checks   # or however the package is imported
    host_checks.enable()                       # builds or loads; RuntimeError if it cannot

The compiled pass only confirms: it answers "every argument fits, here are the pointers" for
plain torch.Tensor arguments that fit, and "not decided" for anything else (a failing argument,
a Tensor subclass, None where no state may be None), which the Python checks then decide
and, for a failing argument, name. So what passes and what raises, and the message, are
those of the Python checks whether or not this is enabled.
"""

import os
import threading

from . import shared

# The C++ source: one function, fitting_pointers(names, tensors, expected, device), with
# shared.fitting_pointers' arguments; a list of data pointers (None for a state of None) where
# every argument fits, else None ("not decided"). No pybind11: one METH_FASTCALL function.
SOURCE = r"""
#include <Python.h>
#include <torch/csrc/Device.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>

#define GDN_JOIN_(a, b) a##b
#define GDN_JOIN(a, b) GDN_JOIN_(a, b)
#define GDN_TEXT_(a) #a
#define GDN_TEXT(a) GDN_TEXT_(a)

namespace {

// The data pointer of `object` as a Python int when it is a plain torch.Tensor with the
// sizes and dtype of `spec` ((torch.Size, torch.dtype)), on `device`, strided and contiguous;
// else nullptr, with no Python error set.
PyObject* fitting_pointer(PyObject* object, PyObject* spec, const c10::Device& device) {
  if (!THPVariable_CheckExact(object) || !PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2) {
    return nullptr;
  }
  PyObject* shape = PyTuple_GET_ITEM(spec, 0);
  PyObject* dtype = PyTuple_GET_ITEM(spec, 1);
  if (!PyTuple_Check(shape) || !THPDtype_Check(dtype)) {
    return nullptr;
  }
  const at::Tensor& tensor = THPVariable_Unpack(object);
  if (tensor.scalar_type() != reinterpret_cast<THPDtype*>(dtype)->scalar_type ||
      tensor.layout() != at::kStrided || tensor.device() != device) {
    return nullptr;
  }
  const auto sizes = tensor.sizes();
  const Py_ssize_t rank = PyTuple_GET_SIZE(shape);
  if (static_cast<Py_ssize_t>(sizes.size()) != rank) {
    return nullptr;
  }
  for (Py_ssize_t axis = 0; axis < rank; ++axis) {
    int overflow = 0;
    const long long expected = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(shape, axis), &overflow);
    if (overflow || (expected == -1 && PyErr_Occurred())) {
      PyErr_Clear();
      return nullptr;
    }
    if (sizes[axis] != expected) {
      return nullptr;
    }
  }
  if (!tensor.is_contiguous()) {
    return nullptr;
  }
  PyObject* pointer = PyLong_FromVoidPtr(const_cast<void*>(tensor.const_data_ptr()));
  if (pointer == nullptr) {
    PyErr_Clear();
  }
  return pointer;
}

PyObject* fitting_pointers(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 4 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[2]) || !THPDevice_Check(args[3])) {
    Py_RETURN_NONE;
  }
  PyObject* tensors = PySequence_Fast(args[1], "tensors");
  if (tensors == nullptr) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  PyObject* names = args[0];
  PyObject* expected = args[2];
  const c10::Device device = reinterpret_cast<THPDevice*>(args[3])->device;
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(tensors);
  PyObject** items = PySequence_Fast_ITEMS(tensors);
  PyObject* pointers = nullptr;
  if (count == PyTuple_GET_SIZE(expected) && count <= PyTuple_GET_SIZE(names)) {
    pointers = PyList_New(count);
  }
  for (Py_ssize_t i = 0; pointers != nullptr && i < count; ++i) {
    PyObject* pointer = nullptr;
    if (items[i] == Py_None) {
      PyObject* name = PyTuple_GET_ITEM(names, i);
      if (PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, "state") == 0) {
        Py_INCREF(Py_None);
        pointer = Py_None;
      }
    } else {
      try {
        pointer = fitting_pointer(items[i], PyTuple_GET_ITEM(expected, i), device);
      } catch (...) {
        PyErr_Clear();
      }
    }
    if (pointer == nullptr) {
      Py_CLEAR(pointers);
    } else {
      PyList_SET_ITEM(pointers, i, pointer);
    }
  }
  Py_DECREF(tensors);
  if (pointers == nullptr) {
    PyErr_Clear();
    Py_RETURN_NONE;
  }
  return pointers;
}

PyMethodDef methods[] = {
    {"fitting_pointers", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(fitting_pointers)),
     METH_FASTCALL, "shared.fitting_pointers's checks on plain tensors: the pointers, or None (not decided)."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, GDN_TEXT(TORCH_EXTENSION_NAME), nullptr, -1, methods};

}  // namespace

PyMODINIT_FUNC GDN_JOIN(PyInit_, TORCH_EXTENSION_NAME)(void) { return PyModule_Create(&module); }
"""

NAME = "gdn_host_checks"
_lock = threading.Lock()
_built = []  # the compiled module, once built or loaded in this process


def enable(verbose=False):
    """Build (the first time on this machine, 10-30 s; `verbose` shows the compiler's output)
    or load the compiled checks, and have the one-pass checks (fitting_pointers) use them from
    the next call. Raises RuntimeError saying what is missing (a compiler, ninja) if they cannot
    be built; the Python checks stay in use then."""
    with _lock:
        if not _built:
            try:
                _built.append(_build(verbose))
            except Exception as error:  # what torch.utils.cpp_extension raises varies by cause
                raise RuntimeError(f"host_checks.enable: the compiled checks could not be built ({error}); "
                                   "they need a C++ compiler, ninja and torch's headers. The Python checks "
                                   "stay in use.") from error
        shared.use_compiled_checks(_built[0].fitting_pointers)


def disable():
    """Back to the Python checks alone."""
    shared.use_compiled_checks(None)


def enabled():
    """Whether the compiled checks are in use."""
    return shared.compiled_checks() is not None


def _build(verbose):
    """The compiled module: torch.utils.cpp_extension builds SOURCE in a folder of its build
    root (rebuilding only where the source or the flags changed) and imports it."""
    from torch.utils import cpp_extension

    cpp_extension.verify_ninja_availability()
    folder = os.path.join(cpp_extension.get_default_build_root(), NAME)
    os.makedirs(folder, exist_ok=True)
    source = os.path.join(folder, "host_checks.cpp")
    if not os.path.exists(source) or _text(source) != SOURCE:
        staged = f"{source}.{os.getpid()}"
        with open(staged, "w", encoding="utf-8") as file:
            file.write(SOURCE)
        os.replace(staged, source)  # atomic: another process may be reading it
    return cpp_extension.load(NAME, [source], extra_cflags=["-O2"], build_directory=folder, verbose=verbose)


def _text(path):
    """The text of the file at `path`."""
    with open(path, encoding="utf-8") as file:
        return file.read()
