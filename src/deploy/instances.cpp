// Cloud GPU instances for `kernelkit plan`: on-demand list prices (Linux, us-east-1 / East US / us-central1), as
// published by the providers and recorded here on 2026-11-30. Prices change: verify before relying on them.
// T4 rows follow the T4 guide's instance table; A10G/L4/A100/H100 rows are the providers' published rates.
#include <array>

#include "kernelkit/model_plan.hpp"

namespace kernelkit {
namespace {

constexpr std::string_view kAws = "aws.amazon.com/ec2/pricing/on-demand (2026-11-30)";
constexpr std::string_view kGcp = "cloud.google.com/compute/gpus-pricing + VM price (2026-11-30)";
constexpr std::string_view kAzure = "azure.microsoft.com/pricing/details/virtual-machines/linux (2026-11-30)";

constexpr std::array<Instance, 16> kInstances = {{
    {"AWS", "g4dn.xlarge", "t4", 1, 0.526, kAws},
    {"AWS", "g4dn.2xlarge", "t4", 1, 0.752, kAws},
    {"AWS", "g4dn.4xlarge", "t4", 1, 1.204, kAws},
    {"AWS", "g4dn.12xlarge", "t4", 4, 3.912, kAws},
    {"GCP", "n1-standard-4 + 1x T4", "t4", 1, 0.54, kGcp},
    {"Azure", "NC4as_T4_v3", "t4", 1, 0.526, kAzure},
    {"Azure", "NC8as_T4_v3", "t4", 1, 0.752, kAzure},
    {"AWS", "g5.xlarge", "a10g", 1, 1.006, kAws},
    {"AWS", "g6.xlarge", "l4", 1, 0.805, kAws},
    {"GCP", "g2-standard-4", "l4", 1, 0.71, kGcp},
    {"GCP", "a2-highgpu-1g", "a100-40gb", 1, 3.67, kGcp},
    {"Azure", "NC24ads_A100_v4", "a100-80gb", 1, 3.673, kAzure},
    {"AWS", "p4d.24xlarge", "a100-40gb", 8, 32.77, kAws},
    {"AWS", "p4de.24xlarge", "a100-80gb", 8, 40.97, kAws},
    {"AWS", "p5.48xlarge", "h100-sxm", 8, 98.32, kAws},
    {"GCP", "a3-highgpu-8g", "h100-sxm", 8, 88.25, kGcp},
}};

}  // namespace

std::span<const Instance> instance_table() { return kInstances; }

}  // namespace kernelkit
