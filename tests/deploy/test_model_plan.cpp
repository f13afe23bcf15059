// `kernelkit plan`'s arithmetic: the guide's weight table, exact parameter counts, the KV-cache formula, bounds, and
// clear errors for malformed config.json files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "host_checks.hpp"
#include "kernelkit/model_plan.hpp"

using namespace kernelkit;
using kernelkit::testing::expect_error;

namespace {
ModelSpec preset(const char* key) {
  auto m = find_model(key);
  EXPECT_TRUE(m.has_value()) << key;
  return *m;
}
std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST(Plan, GuideWeightTableForLlama7B) {
  // LLaMA-7B: 28 / 14 / 7 / 3.5 GB at FP32 / FP16 / INT8 / INT4 (nominal 7B parameters, decimal GB).
  const ModelSpec m = preset("llama-7b");
  EXPECT_DOUBLE_EQ(m.nominal_params * bytes_per_param(Precision::fp32) / 1e9, 28.0);
  EXPECT_DOUBLE_EQ(m.nominal_params * bytes_per_param(Precision::fp16) / 1e9, 14.0);
  EXPECT_DOUBLE_EQ(m.nominal_params * bytes_per_param(Precision::bf16) / 1e9, 14.0);
  EXPECT_DOUBLE_EQ(m.nominal_params * bytes_per_param(Precision::int8) / 1e9, 7.0);
  EXPECT_DOUBLE_EQ(m.nominal_params * bytes_per_param(Precision::int4) / 1e9, 3.5);
  EXPECT_DOUBLE_EQ(bytes_per_param(Precision::int4, 128), 0.5 + 2.0 / 128);  // group scales counted when asked
}

TEST(Plan, Llama2ConfigGives674BParameters) {
  ModelSpec m;
  ASSERT_TRUE(parse_hf_config(read(KK_TEST_DATA "/llama-2-7b-config.json"), "llama-2-7b", &m).ok());
  EXPECT_EQ(m.head_dim, 128);
  EXPECT_EQ(m.kv_heads, 32);
  EXPECT_FALSE(m.tied_embeddings);
  // 32 x (4 x 4096^2 + 3 x 4096 x 11008 + 2 x 4096) + 2 x 32000 x 4096 + 4096 = 6,738,415,616
  EXPECT_DOUBLE_EQ(parameter_count(m), 6738415616.0);
  EXPECT_EQ(std::round(parameter_count(m) / 1e7) / 100, 6.74);
}

TEST(Plan, PresetParameterCountsFromTheArchitecture) {
  EXPECT_DOUBLE_EQ(parameter_count(preset("llama-7b")), 6738415616.0);
  EXPECT_DOUBLE_EQ(parameter_count(preset("llama-13b")), 13015864320.0);
  EXPECT_DOUBLE_EQ(parameter_count(preset("mistral-7b")), 7241732096.0);
  EXPECT_DOUBLE_EQ(parameter_count(preset("llama-3-8b")), 8030261248.0);
  EXPECT_DOUBLE_EQ(parameter_count(preset("qwen2.5-7b")), 7615616512.0);  // qkv biases included
  EXPECT_DOUBLE_EQ(parameter_count(preset("sdxl-unet")), 2.6e9);          // diffusion: the published count
  EXPECT_FALSE(find_model("gpt-5").has_value());
}

TEST(Plan, KvCacheFormulaByHand) {
  // 2 (K, V) x layers x kv_heads x head_dim x 2 bytes.
  EXPECT_EQ(kv_bytes_per_token(preset("llama-7b")), 2u * 32 * 32 * 128 * 2);   // 512 KiB
  EXPECT_EQ(kv_bytes_per_token(preset("mistral-7b")), 2u * 32 * 8 * 128 * 2);  // GQA 4:1 -> 128 KiB
  EXPECT_EQ(kv_bytes_per_token(preset("qwen2.5-7b")), 2u * 28 * 4 * 128 * 2);  // 56 KiB
  EXPECT_EQ(kv_bytes_per_token(preset("llama-7b"), Precision::int8), 2u * 32 * 32 * 128);
  // Mistral-7B at 32k context x batch 2: 131072 B x 65536 tokens = 8 GiB.
  Workload w{32768, 2, 512};
  EXPECT_EQ(plan_memory(preset("mistral-7b"), Precision::fp16, w).kv_cache, 8ull << 30);
  EXPECT_EQ(kv_bytes_per_token(preset("sd15-unet")), 0u);
}

TEST(Plan, FitsAndBoundsOnTheT4) {
  const DeviceProfile t4 = *find_profile("t4");
  const ModelSpec m = preset("llama-7b");
  const Workload w{2048, 1, 512};
  const MemoryPlan fp16 = plan_memory(m, Precision::fp16, w);
  EXPECT_EQ(fp16.weights, static_cast<uint64_t>(6738415616.0 * 2));
  EXPECT_EQ(fp16.kv_cache, 1ull << 30);
  EXPECT_LE(fp16.total(), static_cast<uint64_t>(t4.memory_bytes));  // fits, just
  EXPECT_GT(plan_memory(m, Precision::fp32, w).total(), static_cast<uint64_t>(t4.memory_bytes));
  const SpeedBound s = speed_bound(m, Precision::fp16, t4, w);
  EXPECT_DOUBLE_EQ(s.bytes_per_step, static_cast<double>(fp16.weights + fp16.kv_cache));
  EXPECT_DOUBLE_EQ(s.decode_tokens_s, 320e9 * kAchievableBandwidth / s.bytes_per_step);
  EXPECT_DOUBLE_EQ(s.prefill_tokens_s, 65e12 * kAchievableTensor / (2 * 6738415616.0));
  EXPECT_FALSE(speed_bound(m, Precision::bf16, t4, w).supported);
  // INT8 weights: about half the bytes per step, about twice the decode bound.
  EXPECT_GT(speed_bound(m, Precision::int8, t4, w).decode_tokens_s, 1.7 * s.decode_tokens_s);
}

TEST(Plan, RecommendationsFollowTheGuide) {
  auto has = [](const std::vector<std::string>& r, const char* f) {
    for (const auto& s : r)
      if (s.find(f) != std::string::npos) return true;
    return false;
  };
  const Workload w{4096, 1, 512};
  const auto t4 = recommendations(preset("llama-13b"), *find_profile("t4"), w);
  EXPECT_TRUE(has(t4, "no bf16"));
  EXPECT_TRUE(has(t4, "INT8") || has(t4, "INT4"));
  EXPECT_TRUE(has(recommendations(preset("sdxl-unet"), *find_profile("t4"), w), "attention slicing"));
  EXPECT_FALSE(has(recommendations(preset("llama-7b"), *find_profile("h200"), w), "no bf16"));
}

TEST(Plan, TensorParallelDegreeSplitsLayersNotEmbeddings) {
  // Llama-3-70B in bf16 at context 4096: 70.6e9 parameters, 141 GB of weights; its embeddings and LM head (2 x 128256
  // x 8192) and norms stay whole on every GPU, the rest and the KV cache divide by the degree.
  const ModelSpec m = preset("llama-3-70b");
  const Workload w{4096, 1, 512};
  const MemoryPlan one = plan_memory(m, Precision::bf16, w), two = plan_memory_tp(m, Precision::bf16, w, 2);
  const double replicated = (2.0 * 128256 * 8192 + (2 * 80 + 1) * 8192) * 2;
  EXPECT_NEAR(static_cast<double>(two.weights), (static_cast<double>(one.weights) - replicated) / 2 + replicated, 8);
  EXPECT_EQ(two.kv_cache, one.kv_cache / 2);
  EXPECT_EQ(two.activations, one.activations);
  EXPECT_EQ(plan_memory_tp(m, Precision::bf16, w, 1).total(), one.total());
  EXPECT_EQ(tensor_parallel_degree(m, Precision::bf16, w, find_profile("a100-80gb")->memory_bytes), 2);
  EXPECT_EQ(tensor_parallel_degree(m, Precision::bf16, w, find_profile("a100-40gb")->memory_bytes), 4);
  EXPECT_EQ(tensor_parallel_degree(m, Precision::bf16, w, find_profile("t4")->memory_bytes), 0);  // 8 x 16 GB: no
  EXPECT_EQ(tensor_parallel_degree(preset("llama-3-8b"), Precision::bf16, w, find_profile("a100-40gb")->memory_bytes),
            1);
  // The degree must divide the KV heads: Qwen2.5-7B's 4 cap it at 4, short of what 4 GB GPUs would need.
  EXPECT_EQ(tensor_parallel_degree(preset("qwen2.5-7b"), Precision::fp16, w, 4'000'000'000ull), 0);
  const auto r = recommendations(m, *find_profile("a100-80gb"), w);
  EXPECT_TRUE(std::any_of(r.begin(), r.end(), [](const std::string& s) {
    return s.find("Tensor parallel: BF16 fits on 2 NVIDIA A100-SXM4-80GB GPUs") != std::string::npos;
  })) << r.front();
}

TEST(Plan, InstancesAndCost) {
  bool found = false;
  for (const Instance& i : instance_table()) {
    EXPECT_TRUE(find_profile(i.gpu).has_value()) << i.name;
    EXPECT_GT(i.usd_per_hour, 0);
    EXPECT_FALSE(i.source.empty());
    if (i.name == "g4dn.xlarge") {
      found = true;
      EXPECT_DOUBLE_EQ(i.usd_per_hour, 0.526);
      // $0.526/h at 36 tok/s: 0.526 / 3600 / 36 x 1e6 = $4.06 per million tokens.
      EXPECT_NEAR(usd_per_million_tokens(i, 36.0), 4.0586, 1e-3);
    }
  }
  EXPECT_TRUE(found);
}

TEST(Plan, MalformedConfigsAreClearErrors) {
  ModelSpec m;
  expect_error(parse_hf_config("{ hidden_size: 4096", "x", &m), {"not valid JSON"});
  expect_error(parse_hf_config("[1, 2]", "x", &m), {"JSON object"});
  expect_error(parse_hf_config(read(KK_TEST_DATA "/bad-config.json"), "bad", &m), {"intermediate_size"});
  expect_error(parse_hf_config(R"({"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": "32",
      "num_attention_heads": 32, "vocab_size": 32000})", "x", &m),
               {"num_hidden_layers", "positive integer", "\"32\""});
  expect_error(parse_hf_config(R"({"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 5, "vocab_size": 32000})", "x", &m),
               {"multiple of num_key_value_heads"});
  expect_error(parse_hf_config(R"({"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
      "num_attention_heads": 32, "vocab_size": -1})", "x", &m), {"vocab_size"});
  expect_error(parse_hf_config(R"({"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
      "num_attention_heads": 32, "vocab_size": 32000, "tie_word_embeddings": "yes"})", "x", &m),
               {"tie_word_embeddings", "true or false"});
}

TEST(Plan, Qwen2ConfigImpliesQkvBias) {
  ModelSpec m;
  ASSERT_TRUE(parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 3584, "intermediate_size": 18944,
      "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 152064,
      "tie_word_embeddings": false})", "qwen", &m).ok());
  EXPECT_TRUE(m.qkv_bias);
  EXPECT_DOUBLE_EQ(parameter_count(m), parameter_count(preset("qwen2.5-7b")));
}

TEST(Plan, Fp8WeightsCountTheirRowScalesAndNeedFp8TensorCores) {
  EXPECT_EQ(parse_precision("fp8"), Precision::fp8);
  EXPECT_EQ(parse_precision("E4M3"), Precision::fp8);
  EXPECT_EQ(precision_name(Precision::fp8), "FP8");
  EXPECT_DOUBLE_EQ(bytes_per_param(Precision::fp8), 1.0);
  // LLaMA-7B: a byte a parameter plus an f32 scale per output row: 32 layers x (q, k, v 3 x 4096 + o 4096 + gate, up
  // 2 x 11008 + down 4096) rows, and the embeddings' and LM head's 2 x 32000.
  const ModelSpec m = preset("llama-7b");
  const Workload w{2048, 1, 512};
  const double rows = 32.0 * (3 * 4096 + 4096 + 2 * 11008 + 4096) + 2 * 32000;
  EXPECT_EQ(plan_memory(m, Precision::fp8, w).weights, static_cast<uint64_t>(6738415616.0 + 4 * rows));
  // Tensor parallelism splits the projections' bytes and scales, not the embeddings'.
  const double replicated = 2.0 * 32000 * 4096 + 65 * 4096 + 4 * 64000;
  EXPECT_NEAR(static_cast<double>(plan_memory_tp(m, Precision::fp8, w, 2).weights),
              replicated + (6738415616.0 + 4 * rows - replicated) / 2, 2);
  for (const char* key : {"t4", "a10g", "a100-40gb", "a100-80gb"}) {
    EXPECT_FALSE(precision_supported(Precision::fp8, *find_profile(key))) << key;
    EXPECT_FALSE(speed_bound(m, Precision::fp8, *find_profile(key), w).supported) << key;
  }
  for (const char* key : {"l4", "h100-sxm", "h200"}) {
    const DeviceProfile g = *find_profile(key);
    const SpeedBound s = speed_bound(m, Precision::fp8, g, w);
    EXPECT_TRUE(s.supported) << key;
    EXPECT_EQ(s.tensor_tflops, g.int8_tc_tops) << key;  // the dense FP8 peak: 242 (L4), 1979 (H100, H200)
  }
  auto mentions_fp8 = [](const std::vector<std::string>& r) {
    return std::any_of(r.begin(), r.end(), [](const std::string& s) { return s.find("FP8") != std::string::npos; });
  };
  // LLaMA-13B on a 24 GB GPU: bf16 does not fit, INT8 does; the L4 can run FP8 instead, the A10G cannot.
  EXPECT_TRUE(mentions_fp8(recommendations(preset("llama-13b"), *find_profile("l4"), w)));
  EXPECT_FALSE(mentions_fp8(recommendations(preset("llama-13b"), *find_profile("a10g"), w)));
}
