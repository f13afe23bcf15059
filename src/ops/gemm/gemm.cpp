// linear: TensorViews -> LinearArgs with every check naming the argument, then the CPU reference or cuBLASLt.
#include <string>

#include "ops/gemm/gemm.hpp"
#include "runtime/op_args.hpp"
#include "runtime/overlap.hpp"

namespace kernelkit {
namespace {

Status err(const std::string& what) { return invalid_argument("linear: " + what); }

// A 2-D [rows, cols] operand of the call's dtype and device, last dim contiguous; returns its row stride.
Status matrix(const TensorView& t, const char* arg, const detail::LinearArgs& a, int64_t rows, int64_t cols,
              bool written, int64_t* stride) {
  if (t.dtype != a.dtype)
    return err(std::string(arg) + " dtype " + detail::dt(t.dtype) + " does not match x dtype " + detail::dt(a.dtype));
  if (!(t.device == a.device))
    return err(std::string(arg) + " is on " + to_string(t.device) + " but x is on " + to_string(a.device));
  if (t.ndim != 2 || t.shape[0] != rows || t.shape[1] != cols)
    return err(std::string(arg) + " must have shape [" + std::to_string(rows) + ", " + std::to_string(cols) +
               "], got " + t.shape_string());
  if (cols > 1 && t.strides[1] != 1)
    return err(std::string(arg) + " must have a contiguous last dim (stride 1), got stride " +
               std::to_string(t.strides[1]));
  *stride = rows > 1 ? t.strides[0] : cols;
  if (*stride < cols && (written || rows > 1))
    return err(std::string(arg) + " rows overlap (row stride " + std::to_string(*stride) + " < " +
               std::to_string(cols) + ")");
  if (t.data == nullptr && rows > 0) return err(std::string(arg) + " is a null pointer");
  return Status::Ok();
}

}  // namespace

Status linear(const TensorView& y, const TensorView& x, const TensorView& w, const TensorView* bias,
              const LinearOptions& options, GemmHandle* handle, Stream stream) {
  detail::LinearArgs a;
  a.dtype = x.dtype;
  a.device = x.device;
  a.options = options;
  if (!is_floating(x.dtype))
    return err("x dtype " + detail::dt(x.dtype) + " is not supported (expected f32, f16 or bf16)");
  if (x.ndim != 2) return err("x must be 2-D [m, k], got " + x.shape_string());
  if (w.ndim != 2) return err("w must be 2-D [n, k] (the nn.Linear weight), got " + w.shape_string());
  a.m = x.shape[0];
  a.k = x.shape[1];
  a.n = w.shape[0];
  if (a.k == 0 || a.n == 0) return err("k and n must be > 0, got k = " + std::to_string(a.k) + ", n = " +
                                       std::to_string(a.n));
  KK_RETURN_IF_ERROR(matrix(x, "x", a, a.m, a.k, false, &a.x_stride));
  KK_RETURN_IF_ERROR(matrix(w, "w", a, a.n, a.k, false, &a.w_stride));
  KK_RETURN_IF_ERROR(matrix(y, "y", a, a.m, a.n, true, &a.y_stride));
  a.x = x.data;
  a.w = w.data;
  a.y = y.data;
  const bool wants_bias = options.epilogue != LinearEpilogue::none;
  if (wants_bias != (bias != nullptr))
    return err(wants_bias ? "the bias epilogue needs a bias [n]" : "bias given but the epilogue is none");
  if (bias) {
    int64_t unused = 0;
    TensorView b2 = *bias;  // checked as a [1, n] matrix
    if (bias->ndim != 1) return err("bias must be 1-D [n=" + std::to_string(a.n) + "], got " + bias->shape_string());
    b2.ndim = 2;
    b2.shape = {1, bias->shape[0]};
    b2.strides = {bias->shape[0], bias->strides[0]};
    KK_RETURN_IF_ERROR(matrix(b2, "bias", a, 1, a.n, false, &unused));
    a.bias = bias->data;
  }
  if (options.allow_tf32 && a.dtype != DType::f32)
    return err("allow_tf32 applies to f32 inputs only, got " + detail::dt(a.dtype));
  KK_RETURN_IF_ERROR(detail::check_no_overlap("linear", {{&y, "y"}}, {{&x, "x"}, {&w, "w"}, {bias, "bias"}}));

  // CPU tensors: the reference; CUDA tensors: dtype support on the profile the launch will use, then cuBLASLt.
  return detail::run_op(
      "linear", a, a.m, stream,
      [](const detail::LinearArgs& args, const DeviceProfile* prof) {
        return detail::check_float_dtype("linear", args.dtype, args.device, prof);
      },
      detail::linear_reference,
      [handle](const detail::LinearArgs& args, Stream s) { return detail::linear_cuda(args, handle, s); });
}

}  // namespace kernelkit
