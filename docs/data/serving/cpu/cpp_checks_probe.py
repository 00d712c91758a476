"""How cheap can prefill's argument checks be in C++ (torch.utils.cpp_extension.load_inline)?
On CPU tensors, against the submission's Python checks (shared.checked_pointers) on the same
tensors; a probe for docs/perf.md item 33 (fourteenth session), not part of the kit.

    python docs/data/serving/cpu/cpp_checks_probe.py [cuda]   # from the checkout's root, in its venv
"""
import time, timeit, torch, sys
from torch.utils.cpp_extension import load_inline
src = r'''
#include <torch/extension.h>
// Each tensor: expected sizes (row-major), dtype, same device as q, contiguous. Returns data pointers.
static void expect(const at::Tensor& t, c10::IntArrayRef sizes, at::ScalarType dtype, const c10::Device& dev) {
  TORCH_CHECK_VALUE(t.sizes() == sizes && t.scalar_type() == dtype && t.device() == dev && t.is_contiguous(), "bad");
}
py::tuple pointers(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& state,
                   const at::Tensor& A_log, const at::Tensor& a, const at::Tensor& dt_bias, const at::Tensor& b,
                   const at::Tensor& cu, const at::Tensor& out, const at::Tensor& new_state) {
  const int64_t T = q.size(0), N = cu.size(0) - 1;
  const auto dev = q.device();
  expect(q, {T, 4, 128}, at::kBFloat16, dev); expect(k, {T, 4, 128}, at::kBFloat16, dev);
  expect(v, {T, 8, 128}, at::kBFloat16, dev); expect(state, {N, 8, 128, 128}, at::kFloat, dev);
  expect(A_log, {8}, at::kFloat, dev); expect(a, {T, 8}, at::kBFloat16, dev); expect(dt_bias, {8}, at::kFloat, dev);
  expect(b, {T, 8}, at::kBFloat16, dev); expect(cu, {N + 1}, at::kLong, dev); expect(out, {T, 8, 128}, at::kBFloat16, dev);
  expect(new_state, {N, 8, 128, 128}, at::kFloat, dev);
  return py::make_tuple((uintptr_t)q.data_ptr(), (uintptr_t)k.data_ptr(), (uintptr_t)v.data_ptr(), (uintptr_t)state.data_ptr(),
    (uintptr_t)A_log.data_ptr(), (uintptr_t)a.data_ptr(), (uintptr_t)dt_bias.data_ptr(), (uintptr_t)b.data_ptr(),
    (uintptr_t)cu.data_ptr(), (uintptr_t)out.data_ptr(), (uintptr_t)new_state.data_ptr());
}
'''
t0 = time.time()
mod = load_inline("gdn_check_probe", cpp_sources=src, functions=["pointers"], verbose=False, extra_cflags=["-O2"])
print(f"build {time.time() - t0:.1f} s")
T, N = 6, 1
bf, f32 = torch.bfloat16, torch.float32
args = (torch.randn(T, 4, 128).to(bf), torch.randn(T, 4, 128).to(bf), torch.randn(T, 8, 128).to(bf), torch.randn(N, 8, 128, 128),
        torch.randn(8), torch.randn(T, 8).to(bf), torch.randn(8), torch.randn(T, 8).to(bf), torch.tensor([0, T]),
        torch.empty(T, 8, 128, dtype=bf), torch.empty(N, 8, 128, 128))
args = tuple(t.to(sys.argv[1] if len(sys.argv) > 1 else "cpu") for t in args)  # cuda: a GPU host's tensors
f = lambda: mod.pointers(*args)
print("c++ checks", min(timeit.repeat(f, number=20000, repeat=5)) / 20000 * 1e6, "us")
sys.path.insert(0, ".")
from gdn_bench.algos import load_solution_file  # noqa: E402
from gdn_bench.paths import use_project  # noqa: E402

use_project(".")
shared = load_solution_file("solution/triton/shared.py", "cpp_probe_shared")
names = ("q", "k", "v", "state", "A_log", "a", "dt_bias", "b", "cu_seqlens", "output", "new_state")
specs = shared.expected_specs(names, (T,), N)
g = lambda: shared.checked_pointers(names, args, specs, args[0].device)
print("python checks", min(timeit.repeat(g, number=20000, repeat=5)) / 20000 * 1e6, "us")
