#pragma once
// The pieces of `import attnscope` (docs/python.md). The module is a front end like app/, over the core only:
// keyword arguments set the core's typed requests (keywords.h, analysis/requests.h), which validate themselves;
// a NumPy array is a tensor reference holding a view of its buffer (io::array_ref, core/io/memory_tensor.h), read
// by the core as it reads a file's tensor; the core computes on a worker thread while the calling thread, without the GIL, waits and
// watches for Ctrl+C and progress.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "analysis/job.h"
#include "io/selection.h"

namespace attnscope::python {

namespace py = pybind11;

// An array lent to the core for one call: the reference the core reads it by (its name in messages, e.g.
// "<q: float32 array (64, 32)>", and a view of its buffer). `owner` keeps the NumPy array alive until the call
// ends; it is only touched with the GIL held.
struct LentArray {
    io::TensorRef ref;
    py::object owner;
};

// The view of `array` (GIL held): any float or integer dtype NumPy has in native byte order (float16,
// bfloat16 when the array's dtype is named so, float32, float64, int8..uint64), any strides. Throws
// py::value_error naming `role` for another dtype (complex, object, float128, strings).
// `attributes` and `origin` (the file they came from, or empty) are those of an attnscope.Tensor; the
// attributes must be numbers, strings, booleans, lists and dicts of them (py::value_error naming the first
// that is not).
LentArray lend_array(const py::array& array, const std::string& role, const py::dict& attributes,
                     const std::string& origin);

// One call's arrays (those its references name), the reading settings its options chose (allow_virtual) and
// whether it sets the thread count (threads). Nothing a call sets outlives it (docs/python.md "No state between
// calls").
struct CallArgs {
    std::vector<LentArray> arrays;
    io::ReadSettings read;
    bool sets_threads = false;
};

// The reference a tensor argument goes by in the core: a str is a FILE[:NAME] reference (parsed here, once), an
// array is lent (with the attributes and the origin file of an attnscope.Tensor, so a file's defaults follow it
// and its file-relative references resolve as the command line resolves them on that file).
io::TensorRef tensor_ref(CallArgs& call, const std::string& role, const py::handle& value);

// Raises the Python exception a core exception maps to (see run_released).
[[noreturn]] void raise_mapped(const std::exception_ptr& error);

// Text given to the core as a path or an option: a NUL would cut a path short where the system reads it
// (`a.h5\0x` opens a.h5), and no command line can hold one. Throws py::value_error naming `what`.
std::string checked_text(const py::handle& value, const std::string& what);

// Runs `work` on a worker thread with call.read as its reading settings (call.arrays kept alive), the GIL
// released. Meanwhile the calling thread checks for signals (Ctrl+C cancels through the job's token and raises
// KeyboardInterrupt) and calls `progress(fraction, stage)` with the GIL when the core reports. A call that
// sets the thread count runs alone (no other call of the module computes meanwhile) and puts the count back
// when it ends; other calls run side by side. The environment is checked first, as the command line checks it
// (kernels::check_environment). `progress` must be None or callable (else py::type_error, before any work).
// The core's exceptions become ValueError (bad input, the command line's message), MemoryError, or
// RuntimeError (internal).
void run_released(const CallArgs& call, const std::function<void(const analysis::JobContext&)>& work,
                  const py::object& progress);

}  // namespace attnscope::python
