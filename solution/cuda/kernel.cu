// Gated Delta Net decode step in CUDA, exported through TVM-FFI (destination-passing style).
//
// Definition gdn_decode_qk4_v8_d128_k_last (Qwen3-Next linear attention, TP=4). For every
// batch row b and value head h (query/key head hq = h / 2), with D = 128:
//
//   g      = exp(-exp(A_log[h]) * softplus(a[b,h] + dt_bias[h]))      decay gate
//   beta   = sigmoid(b[b,h])                                          update gate
//   S      = state[b,h]                               (D_v x D_k, K contiguous: "K-last")
//   delta  = beta * (v[b,h] - g * (S @ k[b,hq]))                      (D_v,)
//   S'     = g * S + outer(delta, k[b,hq])                            new_state[b,h]
//   out    = scale * (S' @ q) = scale * (g * (S @ q) + (q . k) * delta)
//
// The last identity gives the output from the same single pass over S that gives S @ k.
// A warp owns whole V rows: lane l holds columns 4l..4l+3 of each of its rows as one float4
// (32 lanes x 4 = 128), so one 16-byte load and one 16-byte store per lane and row, and the
// two row dot products are warp-shuffle sums. No shared memory.
//
// Two launch designs share that warp routine and differ in how rows map to warps:
//   gdn_decode_v1: 1 warp per block, each warp holds 8 V rows in registers (8 loads in flight
//                  per lane before any reduction).
//   gdn_decode_v4: 8 warps per block, one V row per warp.
// Both: grid (B * 8 heads, 128 / 8 row tiles), every block covers 8 consecutive V rows.
//
// Call: fn(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state). `state` may be
// None (a zero state), `scale` 0 or None means 1/sqrt(128). new_state may alias state.
// Bad arguments raise ValueError naming the argument; the kernel runs on the caller's
// current stream of the tensors' device.

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>
#include <tvm/ffi/optional.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>

namespace {

using tvm::ffi::Optional;
using tvm::ffi::TensorView;

constexpr int kNumQHeads = 4;
constexpr int kNumVHeads = 8;
constexpr int kHeadSize = 128;
constexpr int kWarpSize = 32;
constexpr int kLaneFloats = 4;  // one float4 per lane and row
static_assert(kHeadSize == kWarpSize * kLaneFloats, "a warp covers one row with one float4 per lane");

// The two launch designs: V rows each warp holds, warps per block.
enum class Design { kV1, kV4 };
__host__ __device__ constexpr int rows_per_warp(Design d) { return d == Design::kV1 ? 8 : 1; }
__host__ __device__ constexpr int warps_per_block(Design d) { return d == Design::kV1 ? 1 : 8; }
__host__ __device__ constexpr int rows_per_block(Design d) { return rows_per_warp(d) * warps_per_block(d); }

struct Params {
  const __nv_bfloat16* q;  // [B, 4, 128]
  const __nv_bfloat16* k;  // [B, 4, 128]
  const __nv_bfloat16* v;  // [B, 8, 128]
  const float* state;      // [B, 8, 128, 128] K-last, or nullptr for a zero state
  const float* A_log;      // [8]
  const __nv_bfloat16* a;  // [B, 8]
  const float* dt_bias;    // [8]
  const __nv_bfloat16* b;  // [B, 8]
  float scale;
  __nv_bfloat16* out;      // [B, 8, 128]
  float* new_state;        // [B, 8, 128, 128] K-last
};

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int offset = kWarpSize / 2; offset > 0; offset /= 2) {
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  }
  return x;  // every lane gets the sum
}

__device__ __forceinline__ float dot4(float4 x, float4 y) {
  return x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
}

// Four consecutive bf16 values (4-byte aligned) as floats.
__device__ __forceinline__ float4 load_bf16x4(const __nv_bfloat16* p) {
  const auto* pair = reinterpret_cast<const __nv_bfloat162*>(p);
  const float2 lo = __bfloat1622float2(pair[0]);
  const float2 hi = __bfloat1622float2(pair[1]);
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// softplus(x) = max(x, 0) + log1p(exp(-|x|)): no overflow for large x.
__device__ __forceinline__ float softplus(float x) { return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x))); }

// One warp updates V rows [row0, row0 + ROWS) of head bh = batch * 8 + h. Every load is
// issued before the first store (new_state may alias state, so the compiler could not move
// a load past a store): the ROWS state chunks first, then v, q, k and the gate inputs. Then
// S @ k and S @ q are reduced per row, and S' and the outputs stored (lane r writes output
// row row0 + r).
template <int ROWS>
__device__ __forceinline__ void update_rows(const Params& p, int bh, int row0, int lane) {
  static_assert(ROWS <= kWarpSize, "one output-writing lane per row");
  // Row index in [B * 8 * 128 rows] and float4 index of this lane's chunk of it.
  const size_t row_base = static_cast<size_t>(bh) * kHeadSize + row0;
  const size_t chunk0 = row_base * kWarpSize + lane;
  float4 s[ROWS];
  float v[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    s[r] = p.state != nullptr ? reinterpret_cast<const float4*>(p.state)[chunk0 + r * kWarpSize]
                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    v[r] = __bfloat162float(p.v[row_base + r]);
  }
  const int head = bh % kNumVHeads;
  const size_t qk_row = static_cast<size_t>(bh / kNumVHeads) * kNumQHeads + head / (kNumVHeads / kNumQHeads);
  const float4 q = load_bf16x4(p.q + qk_row * kHeadSize + kLaneFloats * lane);
  const float4 k = load_bf16x4(p.k + qk_row * kHeadSize + kLaneFloats * lane);
  const float g = expf(-expf(p.A_log[head]) * softplus(__bfloat162float(p.a[bh]) + p.dt_bias[head]));
  const float beta = 1.0f / (1.0f + expf(-__bfloat162float(p.b[bh])));

  const float qk = warp_sum(dot4(q, k));
  float s_k[ROWS], s_q[ROWS];
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    s_k[r] = warp_sum(dot4(s[r], k));
    s_q[r] = warp_sum(dot4(s[r], q));
  }
#pragma unroll
  for (int r = 0; r < ROWS; ++r) {
    const float delta = beta * (v[r] - g * s_k[r]);
    const float4 s_new = make_float4(g * s[r].x + delta * k.x, g * s[r].y + delta * k.y,
                                     g * s[r].z + delta * k.z, g * s[r].w + delta * k.w);
    reinterpret_cast<float4*>(p.new_state)[chunk0 + r * kWarpSize] = s_new;
    if (lane == r) p.out[row_base + r] = __float2bfloat16_rn(p.scale * (g * s_q[r] + qk * delta));
  }
}

// Block (blockIdx.x = b * 8 + h, blockIdx.y = row tile); warp threadIdx.y of the block.
template <Design kDesign>
__global__ void __launch_bounds__(kWarpSize * warps_per_block(kDesign)) gdn_decode_kernel(Params p) {
  static_assert(kHeadSize % rows_per_block(kDesign) == 0, "row tiles cover D exactly");
  constexpr int kRows = rows_per_warp(kDesign);
  const int row0 = blockIdx.y * rows_per_block(kDesign) + threadIdx.y * kRows;
  update_rows<kRows>(p, blockIdx.x, row0, threadIdx.x);
}

// ---------------------------------------------------------------------------------------
// Host side: argument checks and launch.

// "[d0, d1, ...]" of an expected shape (initializer list) or a tensor's (ShapeView).
template <typename Dims>
std::string shape_str(const Dims& dims) {
  std::ostringstream os;
  os << '[';
  const char* sep = "";
  for (int64_t d : dims) {
    os << sep << d;
    sep = ", ";
  }
  os << ']';
  return os.str();
}

std::string device_str(DLDevice d) {
  if (d.device_type == kDLCPU) return "cpu";
  const std::string kind = d.device_type == kDLCUDA ? "cuda" : "device_type " + std::to_string(d.device_type);
  return kind + ":" + std::to_string(d.device_id);
}

constexpr DLDataType kBF16{kDLBfloat, 16, 1};
constexpr DLDataType kF32{kDLFloat, 32, 1};

// Throws ValueError naming `name` unless `t` is a contiguous tensor of this shape and dtype on
// `device` whose data pointer is `align`-byte aligned; returns the data pointer.
template <typename T>
T* checked_ptr(const char* name, const TensorView& t, std::initializer_list<int64_t> shape, DLDataType dtype,
               DLDevice device, size_t align = 1) {
  if (!std::equal(shape.begin(), shape.end(), t.shape().begin(), t.shape().end())) {
    TVM_FFI_THROW(ValueError) << name << ": expected shape " << shape_str(shape) << ", got "
                              << shape_str(t.shape());
  }
  const DLDataType got = t.dtype();
  if (got.code != dtype.code || got.bits != dtype.bits || got.lanes != dtype.lanes) {
    TVM_FFI_THROW(ValueError) << name << ": expected dtype " << dtype << ", got " << got;
  }
  if (t.device().device_type != device.device_type || t.device().device_id != device.device_id) {
    TVM_FFI_THROW(ValueError) << name << ": expected device " << device_str(device) << " (that of q), got "
                              << device_str(t.device());
  }
  if (!t.IsContiguous()) TVM_FFI_THROW(ValueError) << name << ": expected a contiguous tensor";
  char* data = static_cast<char*>(t.data_ptr()) + t.byte_offset();
  if (reinterpret_cast<uintptr_t>(data) % align != 0) {
    TVM_FFI_THROW(ValueError) << name << ": expected a " << align << "-byte aligned data pointer";
  }
  return reinterpret_cast<T*>(data);
}

// scale as the kernel uses it: 0 or None mean 1/sqrt(D).
float resolve_scale(const Optional<double>& scale) {
  const double s = scale.value_or(0.0);
  if (!std::isfinite(s)) TVM_FFI_THROW(ValueError) << "scale: expected a finite float, 0 or None, got " << s;
  return s != 0.0 ? static_cast<float>(s) : static_cast<float>(1.0 / std::sqrt(static_cast<double>(kHeadSize)));
}

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << what << ": " << cudaGetErrorString(err);
}

// Makes `device_id` the current CUDA device for this scope (the stream belongs to it).
class DeviceScope {
 public:
  explicit DeviceScope(int device_id) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
    changed_ = previous_ != device_id;
    if (changed_) check_cuda(cudaSetDevice(device_id), "cudaSetDevice");
  }
  ~DeviceScope() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

// The exported entry points: checks every argument, then launches one kernel.
template <Design kDesign>
void gdn_decode(TensorView q, TensorView k, TensorView v, Optional<TensorView> state, TensorView A_log,
                TensorView a, TensorView dt_bias, TensorView b, Optional<double> scale, TensorView output,
                TensorView new_state) {
  if (q.ndim() != 4) {
    TVM_FFI_THROW(ValueError) << "q: expected a [B, 1, " << kNumQHeads << ", " << kHeadSize << "] tensor, got "
                              << shape_str(q.shape());
  }
  const int64_t B = q.size(0);
  const DLDevice dev = q.device();
  if (dev.device_type != kDLCUDA) {
    TVM_FFI_THROW(ValueError) << "q: expected device cuda, got " << device_str(dev);
  }
  const int64_t HQ = kNumQHeads, HV = kNumVHeads, D = kHeadSize;
  Params p;
  p.q = checked_ptr<const __nv_bfloat16>("q", q, {B, 1, HQ, D}, kBF16, dev, 4);
  p.k = checked_ptr<const __nv_bfloat16>("k", k, {B, 1, HQ, D}, kBF16, dev, 4);
  p.v = checked_ptr<const __nv_bfloat16>("v", v, {B, 1, HV, D}, kBF16, dev);
  p.state = state.has_value() ? checked_ptr<const float>("state", *state, {B, HV, D, D}, kF32, dev, 16) : nullptr;
  p.A_log = checked_ptr<const float>("A_log", A_log, {HV}, kF32, dev);
  p.a = checked_ptr<const __nv_bfloat16>("a", a, {B, 1, HV}, kBF16, dev);
  p.dt_bias = checked_ptr<const float>("dt_bias", dt_bias, {HV}, kF32, dev);
  p.b = checked_ptr<const __nv_bfloat16>("b", b, {B, 1, HV}, kBF16, dev);
  p.out = checked_ptr<__nv_bfloat16>("output", output, {B, 1, HV, D}, kBF16, dev);
  p.new_state = checked_ptr<float>("new_state", new_state, {B, HV, D, D}, kF32, dev, 16);
  p.scale = resolve_scale(scale);
  if (B == 0) return;

  DeviceScope device_scope(dev.device_id);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, dev.device_id));
  const dim3 grid(static_cast<unsigned>(B * HV), kHeadSize / rows_per_block(kDesign));
  const dim3 block(kWarpSize, warps_per_block(kDesign));
  gdn_decode_kernel<kDesign><<<grid, block, 0, stream>>>(p);
  check_cuda(cudaGetLastError(), "gdn_decode kernel launch");
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(gdn_decode_v1, gdn_decode<Design::kV1>);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(gdn_decode_v4, gdn_decode<Design::kV4>);
