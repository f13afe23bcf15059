// Deployment planning without a GPU: will a model fit on a GPU, how fast can it decode and prefill at best, and what
// will it cost. Every speed here is a roofline *bound* (bandwidth or tensor-core peak over the bytes or FLOPs the model
// must move), never a measurement.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernelkit/profile.hpp"
#include "kernelkit/status.hpp"

namespace kernelkit {

// fp8: e4m3 weights with one f32 scale per output row (LlamaLayer's LayerLinear::fp8, kernelkit.nn.Fp8Linear), on GPUs
// with FP8 tensor cores (sm_89+).
enum class Precision : uint8_t { fp32, fp16, bf16, int8, int4, fp8 };
std::string_view precision_name(Precision p);
std::optional<Precision> parse_precision(std::string_view name);
// Storage bytes per parameter; int4 counts its group scales (one fp16 scale per `int4_group` weights) when > 0. fp8's
// per-row scales depend on the rows, not on the parameter count: plan_memory adds them.
double bytes_per_param(Precision p, int int4_group = 0);
// Whether GPU g runs precision p: bf16 needs bf16 (sm_80+), fp8 FP8 tensor cores (sm_89+).
bool precision_supported(Precision p, const DeviceProfile& g);

enum class ModelKind : uint8_t { decoder_llm, diffusion };

struct ModelSpec {
  std::string key;   // "llama-7b"
  std::string name;  // "LLaMA-7B"
  ModelKind kind = ModelKind::decoder_llm;
  // Decoder LLM architecture (Llama family: gated MLP, RMSNorm, optional GQA and qkv bias).
  int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, vocab = 0;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  int64_t max_context = 0;
  // Diffusion models are planned by parameter count alone.
  double params = 0;
  double nominal_params = 0;  // the size in the model's name (7e9 for LLaMA-7B): the guide's weight table uses it
  std::string source;         // where the architecture numbers come from
};

std::span<const ModelSpec> model_presets();
std::optional<ModelSpec> find_model(std::string_view key);  // case-insensitive key or name

// Exact parameter count from the architecture (decoder LLMs); the given count for diffusion models.
double parameter_count(const ModelSpec& m);
// K and V of every layer for one token, at the KV-cache precision.
uint64_t kv_bytes_per_token(const ModelSpec& m, Precision kv = Precision::fp16);

struct Workload {
  int64_t context = 4096;  // tokens of KV cache per sequence
  int64_t batch = 1;       // sequences decoded together
  int64_t prefill = 512;   // tokens per prefill chunk (activation workspace)
};

// Bytes the deployment needs on the GPU.
struct MemoryPlan {
  uint64_t weights = 0;      // parameters at the precision (int4 includes its group-128 scales, fp8 its row scales)
  uint64_t kv_cache = 0;     // context x batch tokens (fp16 cache; GQA-aware)
  uint64_t activations = 0;  // the largest live set of one layer for a prefill chunk, plus the logits
  uint64_t runtime = 0;      // CUDA context and library workspaces
  uint64_t total() const { return weights + kv_cache + activations + runtime; }
};
MemoryPlan plan_memory(const ModelSpec& m, Precision p, const Workload& w);
constexpr uint64_t kRuntimeOverheadBytes = 600ull << 20;  // CUDA context + cuBLAS workspace, typical on recent drivers

// One GPU's bytes when the decoder layers are split over `tp` GPUs as kernelkit.tp does it: each layer's attention
// and MLP weights and the KV cache divided by tp (its query and KV heads split), embeddings, LM head and norms
// replicated, activations and runtime as one GPU's. tp = 1 is plan_memory.
MemoryPlan plan_memory_tp(const ModelSpec& m, Precision p, const Workload& w, int tp);
// The smallest tensor-parallel degree in {1, 2, 4, 8} (up to max_gpus) whose plan_memory_tp fits `memory_bytes` and
// that divides the query and KV heads (kernelkit.tp's requirement); 0 when none does.
int tensor_parallel_degree(const ModelSpec& m, Precision p, const Workload& w, uint64_t memory_bytes,
                           int max_gpus = 8);

// Fraction of the datasheet bandwidth a well-written kernel reaches: the H200's measured device-to-device copy moved
// 4276 GB/s of 4800 (bench/results/h200-2026-11-30), 0.89.
constexpr double kAchievableBandwidth = 0.89;
// Fraction of the dense tensor-core peak a large GEMM reaches (cuBLAS bf16 8192^3 on the H200: 729 of 989).
constexpr double kAchievableTensor = 0.74;

struct SpeedBound {
  double bytes_per_step = 0;     // weights + KV read per decode step (all sequences of the batch)
  double decode_tokens_s = 0;    // batch x achievable bandwidth / bytes_per_step
  double prefill_tokens_s = 0;   // achievable tensor peak / (2 x params) FLOP per token
  double tensor_tflops = 0;      // the peak used (fp16/bf16/int8/fp8 tensor cores; fp32 CUDA cores)
  bool supported = true;         // the precision runs on this GPU (precision_supported)
};
SpeedBound speed_bound(const ModelSpec& m, Precision p, const DeviceProfile& g, const Workload& w);

// The guide's advice for this model on this GPU (fp16 not bf16 on T4; int8/int4 when it does not fit; offload,
// attention slicing and VAE tiling for diffusion; the kernelkit ops that apply).
std::vector<std::string> recommendations(const ModelSpec& m, const DeviceProfile& g, const Workload& w);

// Cloud instances (data with source and date: src/deploy/instances.cpp).
struct Instance {
  std::string_view provider, name, gpu;  // gpu: profile key
  int gpus;
  double usd_per_hour;                   // on-demand list price
  std::string_view source;
};
std::span<const Instance> instance_table();
// $ per million decoded tokens at the decode bound, one model replica per instance (tensor-parallel over its GPUs).
double usd_per_million_tokens(const Instance& inst, double decode_tokens_s);

// Parses a Hugging Face config.json of a decoder LLM (hidden_size, intermediate_size, num_hidden_layers,
// num_attention_heads, num_key_value_heads, head_dim, vocab_size, tie_word_embeddings, attention_bias / model_type).
// A malformed file is an error naming the key and the expectation.
Status parse_hf_config(std::string_view json_text, std::string_view name, ModelSpec* out);

}  // namespace kernelkit
