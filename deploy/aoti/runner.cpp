// Runs an AOTInductor package (a transformers Llama patched with kernelkit ops, exported by export_llama.py) from C++
// with no Python: loads kernelkit's op library (its TORCH_LIBRARY registrations are what the package's calls to
// kernelkit::* resolve to), loads the package, feeds the token ids and writes the logits.
//   aoti_runner <kernelkit ops library .so> <model.pt2> <ids.bin: int64 [rows, cols]> <rows> <cols> <logits.bin out>
#include <dlfcn.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <vector>

// The loader and the few tensor calls used, not <torch/torch.h> (the whole C++ frontend: 5x the compile time).
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

// Progress on stderr (unbuffered), so a crash shows the last stage reached.
static void stage(const char* what) { std::fprintf(stderr, "aoti_runner: %s\n", what); }

int main(int argc, char** argv) {
  if (argc != 7) {
    std::cerr << "usage: aoti_runner OPS_LIB MODEL.pt2 IDS.bin ROWS COLS LOGITS.bin\n";
    return 2;
  }
  stage("loading ops library");
  // RTLD_LOCAL, as torch.ops.load_library (ctypes) loads it in Python: its static initializers register the kernelkit
  // ops with the dispatcher; none of its symbols need to be visible to later libraries.
  if (!dlopen(argv[1], RTLD_NOW | RTLD_LOCAL)) {
    std::cerr << "cannot load " << argv[1] << ": " << dlerror() << "\n";
    return 1;
  }
  stage("ops library loaded");
  const int64_t rows = std::stoll(argv[4]), cols = std::stoll(argv[5]);
  std::vector<int64_t> ids(static_cast<size_t>(rows * cols));
  std::ifstream(argv[3], std::ios::binary).read(reinterpret_cast<char*>(ids.data()), ids.size() * sizeof(int64_t));
  try {
    torch::inductor::AOTIModelPackageLoader loader(argv[2]);
    stage("package loaded");
    const auto meta = loader.get_metadata();
    const bool cuda = meta.count("AOTI_DEVICE_KEY") && meta.at("AOTI_DEVICE_KEY") == "cuda";
    at::Tensor input = at::from_blob(ids.data(), {rows, cols}, at::kLong).clone();
    if (cuda) input = input.to(at::kCUDA);
    c10::NoGradGuard no_grad;
    stage(cuda ? "running on cuda" : "running on cpu");
    std::vector<at::Tensor> out = loader.run({input});
    stage("ran");
    at::Tensor logits = out.at(0).to(at::kCPU).to(at::kFloat).contiguous();
    std::ofstream(argv[6], std::ios::binary)
        .write(reinterpret_cast<const char*>(logits.data_ptr<float>()), logits.numel() * sizeof(float));
    std::cout << "ran " << argv[2] << " on " << (cuda ? "cuda" : "cpu") << ": logits " << logits.sizes() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "aoti_runner: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
