// Deployment planning: parameter counts from the architecture, memory by component, roofline bounds, advice.
#include "runtime/text.hpp"
#include "kernelkit/model_plan.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <sstream>

namespace kernelkit {
namespace {

using detail::lower;

ModelSpec llm(std::string key, std::string name, int64_t hidden, int64_t inter, int64_t layers, int64_t heads,
              int64_t kv_heads, int64_t vocab, bool qkv_bias, int64_t ctx, double nominal, std::string source) {
  ModelSpec m;
  m.key = std::move(key);
  m.name = std::move(name);
  m.hidden = hidden;
  m.intermediate = inter;
  m.layers = layers;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.head_dim = hidden / heads;
  m.vocab = vocab;
  m.qkv_bias = qkv_bias;
  m.max_context = ctx;
  m.nominal_params = nominal;
  m.source = std::move(source);
  return m;
}

ModelSpec diffusion(std::string key, std::string name, double params, std::string source) {
  ModelSpec m;
  m.key = std::move(key);
  m.name = std::move(name);
  m.kind = ModelKind::diffusion;
  m.params = params;
  m.nominal_params = params;
  m.source = std::move(source);
  return m;
}

// Architectures as published in each model's Hugging Face config.json (the same keys parse_hf_config reads).
const std::vector<ModelSpec>& presets() {
  static const std::vector<ModelSpec> p = {
      llm("llama-7b", "LLaMA-7B", 4096, 11008, 32, 32, 32, 32000, false, 2048, 7e9, "huggyllama/llama-7b config.json"),
      llm("llama-2-7b", "Llama-2-7B", 4096, 11008, 32, 32, 32, 32000, false, 4096, 7e9,
          "meta-llama/Llama-2-7b-hf config.json"),
      llm("llama-13b", "LLaMA-13B", 5120, 13824, 40, 40, 40, 32000, false, 2048, 13e9, "huggyllama/llama-13b config.json"),
      llm("mistral-7b", "Mistral-7B", 4096, 14336, 32, 32, 8, 32000, false, 32768, 7e9,
          "mistralai/Mistral-7B-v0.1 config.json"),
      llm("llama-3-8b", "Llama-3-8B", 4096, 14336, 32, 32, 8, 128256, false, 8192, 8e9,
          "meta-llama/Meta-Llama-3-8B config.json"),
      llm("qwen2.5-7b", "Qwen2.5-7B", 3584, 18944, 28, 28, 4, 152064, true, 32768, 7e9, "Qwen/Qwen2.5-7B config.json"),
      llm("llama-3-70b", "Llama-3-70B", 8192, 28672, 80, 64, 8, 128256, false, 8192, 70e9,
          "meta-llama/Meta-Llama-3-70B config.json"),
      diffusion("sd15-unet", "SD 1.5 UNet", 0.86e9, "Rombach et al. 2022 (860M-parameter UNet)"),
      diffusion("sdxl-unet", "SDXL UNet", 2.6e9, "Podell et al. 2023 (2.6B-parameter UNet)"),
      diffusion("sd3-transformer", "SD3 Medium transformer", 2.0e9, "Stability AI SD3 Medium (2B-parameter MMDiT)"),
  };
  return p;
}

}  // namespace

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "FP32";
    case Precision::fp16: return "FP16";
    case Precision::bf16: return "BF16";
    case Precision::int8: return "INT8";
    case Precision::int4: return "INT4";
    case Precision::fp8:
      return "FP8";
  }
  return "?";
}

std::optional<Precision> parse_precision(std::string_view name) {
  const std::string n = lower(name);
  if (n == "fp32" || n == "f32") return Precision::fp32;
  if (n == "fp16" || n == "f16") return Precision::fp16;
  if (n == "bf16") return Precision::bf16;
  if (n == "int8" || n == "i8") return Precision::int8;
  if (n == "int4" || n == "i4") return Precision::int4;
  if (n == "fp8" || n == "f8" || n == "e4m3" || n == "f8e4m3") return Precision::fp8;
  return std::nullopt;
}

double bytes_per_param(Precision p, int int4_group) {
  switch (p) {
    case Precision::fp32: return 4;
    case Precision::fp16:
    case Precision::bf16: return 2;
    case Precision::int8:
    case Precision::fp8:
      return 1;
    case Precision::int4: return 0.5 + (int4_group > 0 ? 2.0 / int4_group : 0.0);  // + one fp16 scale per group
  }
  return 0;
}

bool precision_supported(Precision p, const DeviceProfile& g) {
  return (p != Precision::bf16 || g.bf16) && (p != Precision::fp8 || g.fp8);
}

std::span<const ModelSpec> model_presets() { return presets(); }

std::optional<ModelSpec> find_model(std::string_view key) {
  const std::string k = lower(key);
  for (const auto& m : presets())
    if (m.key == k || lower(m.name) == k) return m;
  return std::nullopt;
}

namespace {
// A decoder LLM's parameters in two parts: the layers' attention and MLP projections (what tensor parallelism splits),
// and the rest (embeddings, LM head unless tied, the norms: replicated).
double projection_params(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden), q = static_cast<double>(m.heads * m.head_dim),
               kv = static_cast<double>(m.kv_heads * m.head_dim), inter = static_cast<double>(m.intermediate);
  const double attention = h * q + 2 * h * kv + q * h + (m.qkv_bias ? q + 2 * kv : 0);  // q, k, v, o (+ biases)
  const double mlp = 3 * h * inter;                                                      // gate, up, down
  return static_cast<double>(m.layers) * (attention + mlp);
}
double replicated_params(const ModelSpec& m) {
  const double h = static_cast<double>(m.hidden);
  const double embeddings = static_cast<double>(m.vocab) * h * (m.tied_embeddings ? 1 : 2);
  return embeddings + static_cast<double>(2 * m.layers + 1) * h;  // + input / post-attention norms, final norm
}
// The output rows of the same two parts' matrices (fp8 stores an f32 scale per row): q, k, v, o, gate, up and down of
// every layer; the embeddings and LM head (a row per token). Norms and biases count as bytes only.
double projection_rows(const ModelSpec& m) {
  return static_cast<double>(m.layers) *
         static_cast<double>(m.heads * m.head_dim + 2 * m.kv_heads * m.head_dim + 2 * m.hidden + 2 * m.intermediate);
}
double replicated_rows(const ModelSpec& m) { return static_cast<double>(m.vocab) * (m.tied_embeddings ? 1 : 2); }
// Bytes of `params` parameters in matrices of `rows` output rows at precision p (int4 with its group-128 scales).
double weight_bytes(Precision p, double params, double rows) {
  return params * bytes_per_param(p, 128) + (p == Precision::fp8 ? 4 * rows : 0);
}
}  // namespace

double parameter_count(const ModelSpec& m) {
  if (m.kind == ModelKind::diffusion) return m.params;
  return projection_params(m) + replicated_params(m);
}

uint64_t kv_bytes_per_token(const ModelSpec& m, Precision kv) {
  if (m.kind != ModelKind::decoder_llm) return 0;
  return static_cast<uint64_t>(2 * m.layers * m.kv_heads * m.head_dim * bytes_per_param(kv));
}

MemoryPlan plan_memory(const ModelSpec& m, Precision p, const Workload& w) {
  MemoryPlan mp;
  const double params = parameter_count(m);
  // Diffusion models are planned by parameter count alone: fp8's row scales (about 4 / in_features bytes a parameter,
  // under 1%) are left out there.
  const double rows = m.kind == ModelKind::decoder_llm ? projection_rows(m) + replicated_rows(m) : 0;
  mp.weights = static_cast<uint64_t>(weight_bytes(p, params, rows));
  mp.runtime = kRuntimeOverheadBytes;
  if (m.kind == ModelKind::decoder_llm) {
    mp.kv_cache = kv_bytes_per_token(m) * static_cast<uint64_t>(w.context * w.batch);
    // One layer's live set for a prefill chunk in fp16: residual, normed input, q/k/v, gate, up, activated product
    // (no S x S scores with flash attention), plus fp32 logits of the last token of each sequence.
    const double per_token = 3.0 * static_cast<double>(m.hidden) + 3.0 * static_cast<double>(m.intermediate);
    mp.activations = static_cast<uint64_t>(static_cast<double>(w.prefill) * per_token * 2 +
                                           static_cast<double>(w.batch * m.vocab) * 4);
  } else {
    // Diffusion: UNet/DiT activations at 512-1024 px in fp16 are of the order of the fp16 weights (a rough rule,
    // labelled as an estimate in the output).
    mp.activations = static_cast<uint64_t>(params * 2 * static_cast<double>(std::max<int64_t>(1, w.batch)));
  }
  return mp;
}

MemoryPlan plan_memory_tp(const ModelSpec& m, Precision p, const Workload& w, int tp) {
  MemoryPlan mp = plan_memory(m, p, w);
  if (tp <= 1 || m.kind != ModelKind::decoder_llm) return mp;
  mp.weights = static_cast<uint64_t>(weight_bytes(p, replicated_params(m), replicated_rows(m)) +
                                     weight_bytes(p, projection_params(m) / tp, projection_rows(m) / tp));
  mp.kv_cache /= static_cast<uint64_t>(tp);
  return mp;
}

int tensor_parallel_degree(const ModelSpec& m, Precision p, const Workload& w, uint64_t memory_bytes, int max_gpus) {
  for (int tp = 1; tp <= max_gpus; tp *= 2) {
    if (m.kind == ModelKind::decoder_llm && (m.heads % tp != 0 || m.kv_heads % tp != 0)) continue;
    if (m.kind != ModelKind::decoder_llm && tp > 1) return 0;  // kernelkit.tp splits decoder layers only
    if (plan_memory_tp(m, p, w, tp).total() <= memory_bytes) return tp;
  }
  return 0;
}

SpeedBound speed_bound(const ModelSpec& m, Precision p, const DeviceProfile& g, const Workload& w) {
  SpeedBound s;
  s.supported = precision_supported(p, g);
  const MemoryPlan mp = plan_memory(m, p, w);
  const double bw = g.hbm_gbps * 1e9 * kAchievableBandwidth;
  switch (p) {
    case Precision::fp32: s.tensor_tflops = g.fp32_tflops; break;  // CUDA cores (TF32 off, as for validation)
    case Precision::int8: s.tensor_tflops = g.int8_tc_tops; break;  // W8A8 on int8 tensor cores
    // FP8 (W8A8 e4m3): the dense FP8 peak equals the INT8 one on every FP8 GPU of the table (L4 242, H100 / H200 1979).
    case Precision::fp8:
      s.tensor_tflops = g.int8_tc_tops;
      break;
    default: s.tensor_tflops = g.fp16_tc_tflops; break;             // fp16/bf16, and int4 weight-only (fp16 MMA)
  }
  if (m.kind != ModelKind::decoder_llm) return s;
  // Decode: every step reads all weights once and each sequence's KV cache.
  s.bytes_per_step = static_cast<double>(mp.weights + mp.kv_cache);
  s.decode_tokens_s = static_cast<double>(w.batch) * bw / s.bytes_per_step;
  // Prefill: 2 FLOP per parameter per token (attention's S^2 term left out: small at these contexts).
  s.prefill_tokens_s = s.tensor_tflops * 1e12 * kAchievableTensor / (2 * parameter_count(m));
  return s;
}

std::vector<std::string> recommendations(const ModelSpec& m, const DeviceProfile& g, const Workload& w) {
  std::vector<std::string> r;
  const double mem = static_cast<double>(g.memory_bytes);
  auto fits = [&](Precision p) { return static_cast<double>(plan_memory(m, p, w).total()) <= mem; };
  auto gb = [](double b) {
    std::ostringstream os;
    os.precision(3);
    os << b / 1e9 << " GB";
    return os.str();
  };
  const Precision half = g.bf16 ? Precision::bf16 : Precision::fp16;
  if (!g.bf16)
    r.push_back(g.name + " has no bf16: run fp16 (and keep fp32 accumulation); kernelkit refuses bf16 on this GPU.");
  if (fits(half)) {
    const double total = static_cast<double>(plan_memory(m, half, w).total());
    r.push_back(std::string(precision_name(half)) + " fits: " + gb(total) + " of " + gb(mem) + "." +
                (mem - total < 0.1 * mem ? " Little headroom: fragmentation or a longer context can push it over; "
                                           "INT8 weights leave room."
                                         : ""));
  } else if (fits(Precision::int8)) {
    r.push_back(std::string(precision_name(half)) + " does not fit (" +
                gb(static_cast<double>(plan_memory(m, half, w).total())) + " > " + gb(mem) +
                "): quantize weights to INT8 (" + gb(static_cast<double>(plan_memory(m, Precision::int8, w).total())) +
                ")" + (g.fp8 ? ", or FP8 on this GPU's FP8 tensor cores (the same bytes and per-row scales)" : "") +
                ".");
  } else if (fits(Precision::int4)) {
    r.push_back("Only INT4 weights fit (" + gb(static_cast<double>(plan_memory(m, Precision::int4, w).total())) +
                " of " + gb(mem) + "): use group-128 INT4 weight-only quantization.");
  } else {
    r.push_back("Does not fit even with INT4 weights: use a GPU with more memory, tensor parallelism over several "
                "GPUs, or CPU offload (much slower).");
  }
  // Across GPUs of this kind: the fewest that hold the model at the half precision (kernelkit.tp).
  if (!fits(half))
    if (const int tp = tensor_parallel_degree(m, half, w, g.memory_bytes); tp > 1)
      r.push_back("Tensor parallel: " + std::string(precision_name(half)) + " fits on " + std::to_string(tp) + " " +
                  g.name + " GPUs (" + gb(static_cast<double>(plan_memory_tp(m, half, w, tp).total())) +
                  " each; kernelkit.tp.parallelize, torchrun --nproc-per-node " + std::to_string(tp) + ").");
  if (m.kind == ModelKind::decoder_llm) {
    const double kv = static_cast<double>(plan_memory(m, half, w).kv_cache);
    if (kv > 0.25 * mem)
      r.push_back("The KV cache (" + gb(kv) + " at context " + std::to_string(w.context) + " x batch " +
                  std::to_string(w.batch) + ") is a large share of memory: shorten the context, lower the batch, or "
                  "prefer a GQA model.");
    if (m.kv_heads == m.heads)
      r.push_back("No GQA (" + std::to_string(m.heads) +
                  " KV heads): decode reads the full KV cache per head; batch decode is KV-bandwidth bound at long "
                  "context.");
    r.push_back("Decode is bound by bytes per token: INT8 weights roughly halve and INT4 roughly quarter the weight "
                "bytes of fp16.");
    r.push_back(std::string("kernelkit ops for this model: rms_norm and fused_add_rms_norm (2 per layer), "
                            "silu_and_mul (the gated MLP), rotary_embedding, attention (prefill) and decode_attention "
                            "(KV cache), and for INT8 / INT4 weights linear_weight_only (W8A16 / W4A16) or "
                            "linear_w8a8") +
                (g.fp8 ? "; for FP8 weights linear_fp8, fed by rms_norm_quant, fused_add_rms_norm_quant and "
                         "silu_and_mul_quant (LlamaLayer's LayerLinear::fp8)."
                       : "."));
  } else {
    if (!fits(half) || g.memory_bytes <= 16e9)
      r.push_back("Diffusion on " + gb(mem) + ": enable model CPU offload if the pipeline (text encoders + VAE + " +
                  "denoiser) does not fit, attention slicing, and VAE tiling for 1024 px images.");
    r.push_back("kernelkit ops for this model: layer_norm, ada_layer_norm (DiT/SD3 modulation), rms_norm (diffusers "
                "RMSNorm, also without weight), rms_norm_gelu, gelu / gelu_tanh / geglu (feed-forward), softmax.");
  }
  return r;
}

double usd_per_million_tokens(const Instance& inst, double decode_tokens_s) {
  if (decode_tokens_s <= 0) return 0;
  return inst.usd_per_hour / 3600.0 / decode_tokens_s * 1e6;
}

}  // namespace kernelkit
