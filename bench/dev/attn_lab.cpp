// The prefill under KERNELKIT_TUNE settings through the C++ API, without Python (a lab: a build directory's
// libkernelkit.a and a GPU are all it needs, so it can run from a build made elsewhere). For each shape, each setting
// is run once with its output poisoned first and compared with the first setting's, element by element (a setting
// the planner refuses is reported and skipped), then timed: CUDA events around `runs` back-to-back launches, median
// of 7 such batches, TFLOP/s of the visible score pairs.
// scripts/carry-build packs it (build/gc-native/attn_lab); by hand:
//   g++ -O2 -std=c++20 -Iinclude -I/usr/local/cuda/include bench/dev/attn_lab.cpp BUILD/libkernelkit.a -ldl \
//     -L/usr/local/cuda/lib64 -lcudart_static -lrt -lpthread -o attn_lab
//   ./attn_lab [--runs 20] [--shape b,s,h,h_kv,d,causal]... -- SETTING...   ("" or "default": no KERNELKIT_TUNE)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernelkit/ops/attention.hpp"

namespace {

struct Shape {
  int64_t b, s, h, hk, d;
  bool causal;
};

bool check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) std::fprintf(stderr, "attn_lab: %s: %s\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kernelkit;
  int runs = 20;
  std::vector<Shape> shapes;
  std::vector<std::string> settings;
  bool after_dashes = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (after_dashes) {
      settings.push_back(a == "default" ? "" : a);
    } else if (a == "--") {
      after_dashes = true;
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (a == "--shape" && i + 1 < argc) {
      Shape s{};
      int causal = 1;
      if (std::sscanf(argv[++i], "%ld,%ld,%ld,%ld,%ld,%d", &s.b, &s.s, &s.h, &s.hk, &s.d, &causal) != 6) {
        std::fprintf(stderr, "attn_lab: --shape b,s,h,h_kv,d,causal\n");
        return 2;
      }
      s.causal = causal != 0;
      shapes.push_back(s);
    } else {
      std::fprintf(stderr, "attn_lab: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (shapes.empty()) shapes = {{1, 4096, 32, 32, 128, true}, {1, 4096, 32, 8, 128, true}};
  if (settings.empty()) settings = {""};
  int failures = 0;
  for (const Shape& sh : shapes) {
    const int64_t nq = sh.b * sh.s * sh.h * sh.d, nk = sh.b * sh.s * sh.hk * sh.d;
    std::vector<__nv_bfloat16> host(nq + 2 * nk);
    std::mt19937 gen(1234);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& x : host) x = __float2bfloat16(u(gen));
    __nv_bfloat16 *q = nullptr, *out = nullptr;
    if (!check(cudaMalloc(&q, (nq + 2 * nk) * 2), "malloc") || !check(cudaMalloc(&out, nq * 2), "malloc")) return 1;
    check(cudaMemcpy(q, host.data(), host.size() * 2, cudaMemcpyHostToDevice), "copy");
    const Device dev = Device::cuda(0);
    const auto Q = TensorView::contiguous(q, DType::bf16, {sh.b, sh.s, sh.h, sh.d}, dev);
    const auto K = TensorView::contiguous(q + nq, DType::bf16, {sh.b, sh.s, sh.hk, sh.d}, dev);
    const auto V = TensorView::contiguous(q + nq + nk, DType::bf16, {sh.b, sh.s, sh.hk, sh.d}, dev);
    const auto O = TensorView::contiguous(out, DType::bf16, {sh.b, sh.s, sh.h, sh.d}, dev);
    AttentionOptions opt;
    opt.causal = sh.causal;
    const double pairs = sh.causal ? sh.s * (sh.s + 1) / 2.0 : double(sh.s) * sh.s;
    const double flops = 4.0 * sh.b * sh.h * sh.d * pairs;
    std::vector<__nv_bfloat16> first(nq), got(nq);
    std::printf("b%ld s%ld h%ld/%ld d%ld%s\n", sh.b, sh.s, sh.h, sh.hk, sh.d, sh.causal ? " causal" : "");
    for (size_t si = 0; si < settings.size(); ++si) {
      const std::string& set = settings[si];
      if (set.empty()) unsetenv("KERNELKIT_TUNE");
      else setenv("KERNELKIT_TUNE", set.c_str(), 1);
      const char* name = set.empty() ? "default" : set.c_str();
      check(cudaMemset(out, 0xff, nq * 2), "poison");  // NaN: an unwritten element fails the comparison
      Status st = attention(O, std::nullopt, Q, K, V, opt);
      if (!st.ok()) {
        std::printf("  %-36s refused: %s\n", name, st.to_string().c_str());
        continue;
      }
      if (!check(cudaDeviceSynchronize(), name)) return 1;
      check(cudaMemcpy(got.data(), out, nq * 2, cudaMemcpyDeviceToHost), "copy back");
      double worst = 0.0;
      bool finite = true;
      for (int64_t i = 0; i < nq; ++i) {
        const float g = __bfloat162float(got[i]);
        finite = finite && std::isfinite(g);
        if (si > 0) worst = std::max(worst, double(std::fabs(g - __bfloat162float(first[i]))));
      }
      if (si == 0) first = got;
      // Against the first setting: bf16 outputs of the same function, one rounding apart at most (|out| < 1 here).
      const bool ok = finite && worst <= 1.0 / 64;
      failures += ok ? 0 : 1;
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      std::vector<float> ms;
      for (int rep = 0; rep < 8; ++rep) {
        cudaEventRecord(e0);
        for (int r = 0; r < runs; ++r) st = attention(O, std::nullopt, Q, K, V, opt);
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float t = 0;
        cudaEventElapsedTime(&t, e0, e1);
        if (rep > 0) ms.push_back(t / runs);  // the first batch warms up
      }
      std::sort(ms.begin(), ms.end());
      const double us = ms[ms.size() / 2] * 1e3;
      std::printf("  %-36s %9.1f us %7.1f TFLOP/s  %s (max |diff| vs first %.4g)\n", name, us, flops / us / 1e6,
                  ok ? "ok" : "MISMATCH", worst);
      cudaEventDestroy(e0);
      cudaEventDestroy(e1);
    }
    cudaFree(q);
    cudaFree(out);
  }
  return failures == 0 ? 0 : 1;
}
