// Status: every public entry point returns one. Bad input is reported, never aborted on.
#pragma once

#include <string>
#include <utility>

namespace kernelkit {

enum class StatusCode {
  ok = 0,
  invalid_argument,  // a shape, dtype, pointer or value the op cannot accept
  unsupported,       // valid in general, but not on this device/profile/build (e.g. bf16 on sm_75)
  cuda_error,        // the CUDA runtime reported an error
  no_device,         // a CUDA op was asked for and there is no usable GPU (or no CUDA build)
  internal,
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  bool ok() const { return code_ == StatusCode::ok; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

const char* status_code_name(StatusCode c);

// The libstdc++ string ABI (_GLIBCXX_USE_CXX11_ABI) the core was compiled with; -1 under another standard library.
// Whatever links the core must use the same one, since Status holds a std::string (the op library checks at load).
int core_string_abi();

inline Status invalid_argument(std::string m) { return {StatusCode::invalid_argument, std::move(m)}; }
inline Status unsupported(std::string m) { return {StatusCode::unsupported, std::move(m)}; }

}  // namespace kernelkit

// Propagate a non-ok Status to the caller.
#define KK_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::kernelkit::Status kk_status_ = (expr); \
    if (!kk_status_.ok()) return kk_status_; \
  } while (0)
