// Dense GEMM (kernelkit/ops/gemm.hpp); this header stays for the code that includes it by its first name.
#pragma once

#include "kernelkit/ops/gemm.hpp"
