#include "kernelkit/status.hpp"

namespace kernelkit {

const char* status_code_name(StatusCode c) {
  switch (c) {
    case StatusCode::ok: return "ok";
    case StatusCode::invalid_argument: return "invalid_argument";
    case StatusCode::unsupported: return "unsupported";
    case StatusCode::cuda_error: return "cuda_error";
    case StatusCode::no_device: return "no_device";
    case StatusCode::internal: return "internal";
  }
  return "?";
}

int core_string_abi() {
#ifdef _GLIBCXX_USE_CXX11_ABI
  return _GLIBCXX_USE_CXX11_ABI;
#else
  return -1;
#endif
}

std::string Status::to_string() const {
  return ok() ? std::string("ok") : std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace kernelkit
