// `kernelkit plan`: will this model fit on this GPU, how fast can it decode at best, and what will it cost.
// Everything is computed from the model's architecture and the device profiles (no GPU needed); speeds are roofline
// bounds and labelled as such.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "commands.hpp"
#include "kernelkit/model_plan.hpp"

namespace kernelkit::cli {
namespace {

struct PlanOptions {
  std::string model, config, gpu = "all", precision = "all";
  Workload w{0, 1, 512};  // context 0: the model's own (at most 4096)
  bool json = false;
};

std::string gb(double bytes, int prec = 2) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << bytes / 1e9 << " GB";
  return os.str();
}
std::string gib(double bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << bytes / double(1ull << 30) << " GiB";
  return os.str();
}
std::string num(double v, int prec = 0) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(prec) << v;
  return os.str();
}
// The guide's weight table uses nominal sizes and round numbers: 28 / 14 / 7 / 3.5 GB for a "7B" model.
std::string guide_gb(double bytes) {
  std::ostringstream os;
  os << std::defaultfloat << std::setprecision(3) << bytes / 1e9 << " GB";
  return os.str();
}

int run_plan(const PlanOptions& o) {
  ModelSpec m;
  if (!o.config.empty()) {
    std::ifstream in(o.config);
    if (!in) {
      std::cerr << "error: --config '" << o.config << "' cannot be read\n";
      return 2;
    }
    std::stringstream text;
    text << in.rdbuf();
    if (Status s = parse_hf_config(text.str(), o.config, &m); !s.ok()) {
      std::cerr << "error: " << s.message() << "\n";
      return 2;
    }
  } else {
    auto found = find_model(o.model);
    if (!found) {
      std::cerr << "error: --model '" << o.model << "' is not a preset; expected one of:";
      for (const auto& p : model_presets()) std::cerr << " " << p.key;
      std::cerr << " (or pass --config config.json)\n";
      return 2;
    }
    m = *found;
  }
  std::vector<DeviceProfile> gpus;
  if (o.gpu == "all") gpus.assign(profile_table().begin(), profile_table().end());
  else if (auto p = find_profile(o.gpu)) gpus.push_back(*p);
  else {
    std::cerr << "error: --gpu '" << o.gpu << "' is not a profile; expected all or one of:";
    for (const auto& p : profile_table()) std::cerr << " " << p.key;
    std::cerr << "\n";
    return 2;
  }
  std::vector<Precision> precisions;
  if (o.precision == "all")
    precisions = {Precision::fp32, Precision::fp16, Precision::bf16, Precision::fp8, Precision::int8, Precision::int4};
  else if (auto p = parse_precision(o.precision)) precisions = {*p};
  else {
    std::cerr << "error: --precision '" << o.precision << "' must be all, fp32, fp16, bf16, fp8, int8 or int4\n";
    return 2;
  }

  Workload w = o.w;
  if (w.context <= 0) w.context = m.max_context > 0 ? std::min<int64_t>(m.max_context, 4096) : 4096;
  const bool llm = m.kind == ModelKind::decoder_llm;
  const double params = parameter_count(m);
  nlohmann::json j = {{"model", {{"key", m.key}, {"name", m.name}, {"kind", llm ? "decoder_llm" : "diffusion"},
                                 {"parameters", params}, {"nominal_parameters", m.nominal_params},
                                 {"source", m.source}}},
                      {"workload", {{"context", w.context}, {"batch", w.batch}, {"prefill_chunk", w.prefill}}}};
  std::ostringstream t;
  t << m.name << " (" << (llm ? "decoder LLM" : "diffusion model") << "): " << std::fixed << std::setprecision(2)
    << params / 1e9 << " B parameters" << (llm ? " counted from the architecture" : " (published count)") << "\n";
  if (llm) {
    t << "  " << m.layers << " layers, hidden " << m.hidden << ", intermediate " << m.intermediate << ", " << m.heads
      << " heads / " << m.kv_heads << " KV heads, head_dim " << m.head_dim << ", vocab " << m.vocab
      << (m.tied_embeddings ? ", tied embeddings" : "") << (m.qkv_bias ? ", qkv bias" : "") << "\n";
    j["model"].update({{"layers", m.layers}, {"hidden", m.hidden}, {"intermediate", m.intermediate},
                       {"heads", m.heads}, {"kv_heads", m.kv_heads}, {"head_dim", m.head_dim}, {"vocab", m.vocab}});
  }
  // The guide's weight table (nominal size, decimal GB, no quantization scales).
  if (m.nominal_params > 0) {
    t << "Weights at the nominal " << num(m.nominal_params / 1e9, m.nominal_params < 1e9 ? 2 : 0)
      << "B (the guide's table):";
    for (Precision p : {Precision::fp32, Precision::fp16, Precision::bf16, Precision::int8, Precision::int4}) {
      const double b = m.nominal_params * bytes_per_param(p);
      t << "  " << precision_name(p) << " " << guide_gb(b);
      j["guide_weights_gb"][std::string(precision_name(p))] = b / 1e9;
    }
    t << "\n";
  }
  if (llm) {
    const double kv = static_cast<double>(kv_bytes_per_token(m));
    t << "KV cache (fp16): " << num(kv / 1024, 0) << " KiB per token; context " << w.context << " x batch "
      << w.batch << " = " << gib(kv * w.context * w.batch) << "\n";
    j["kv_bytes_per_token"] = kv;
  }
  t << "\nMemory = weights (int4 with group-128 fp16 scales, fp8 with an f32 scale per row) + KV cache + activation "
    << "workspace (" << (llm ? "prefill chunk " + std::to_string(w.prefill) + " tokens" : "estimate: ~fp16 weight size")
    << ") + " << gib(static_cast<double>(kRuntimeOverheadBytes)) << " CUDA runtime.\n"
    << "Speeds are roofline BOUNDS: decode = " << num(kAchievableBandwidth * 100) << "% of datasheet bandwidth / "
    << "bytes per step; prefill = " << num(kAchievableTensor * 100) << "% of dense tensor peak / 2 FLOP per "
    << "parameter.\n";

  for (const DeviceProfile& g : gpus) {
    t << "\n" << g.name << " [" << g.key << "]: " << gb(static_cast<double>(g.memory_bytes), 0) << ", "
      << num(g.hbm_gbps) << " GB/s, " << num(g.fp16_tc_tflops) << " TFLOP/s fp16, " << num(g.int8_tc_tops)
      << " TOP/s int8"
      << (g.bf16 ? "" : ", no bf16") << "\n";
    t << "  " << std::left << std::setw(6) << "prec" << std::right << std::setw(11) << "weights" << std::setw(11)
      << "KV" << std::setw(11) << "act" << std::setw(11) << "total" << std::setw(6) << "fits" << std::setw(12)
      << "headroom";
    if (llm) t << std::setw(16) << "decode tok/s" << std::setw(16) << "prefill tok/s";
    t << "\n";
    nlohmann::json gj = {{"profile", g.key}, {"memory_bytes", g.memory_bytes}, {"rows", nlohmann::json::array()}};
    for (Precision p : precisions) {
      const MemoryPlan mp = plan_memory(m, p, w);
      const SpeedBound sb = speed_bound(m, p, g, w);
      const double headroom = static_cast<double>(g.memory_bytes) - static_cast<double>(mp.total());
      const bool fits = headroom >= 0;
      t << "  " << std::left << std::setw(6) << precision_name(p) << std::right << std::setw(11)
        << gb(static_cast<double>(mp.weights), 1) << std::setw(11) << gb(static_cast<double>(mp.kv_cache), 1)
        << std::setw(11) << gb(static_cast<double>(mp.activations), 2) << std::setw(11)
        << gb(static_cast<double>(mp.total()), 1);
      if (!sb.supported) {
        t << "   n/a: " << g.name << (p == Precision::fp8 ? " has no FP8 tensor cores\n" : " has no bf16\n");
        gj["rows"].push_back({{"precision", precision_name(p)}, {"supported", false}});
        continue;
      }
      t << std::setw(6) << (fits ? "yes" : "NO") << std::setw(12) << gb(headroom, 1);
      if (llm) t << std::setw(16) << (fits ? num(sb.decode_tokens_s, 1) : "-") << std::setw(16)
                 << (fits ? num(sb.prefill_tokens_s, 0) : "-");
      t << "\n";
      gj["rows"].push_back({{"precision", precision_name(p)}, {"supported", true}, {"weights", mp.weights},
                            {"kv_cache", mp.kv_cache}, {"activations", mp.activations}, {"runtime", mp.runtime},
                            {"total", mp.total()}, {"fits", fits}, {"headroom", headroom},
                            {"decode_tokens_s_bound", sb.decode_tokens_s},
                            {"prefill_tokens_s_bound", sb.prefill_tokens_s}, {"bytes_per_step", sb.bytes_per_step}});
    }
    t << "  Recommendations:\n";
    for (const auto& r : recommendations(m, g, w)) {
      t << "   - " << r << "\n";
      gj["recommendations"].push_back(r);
    }
    j["gpus"].push_back(gj);
  }

  // Cost: the cheapest instance that fits (one replica, tensor-parallel over the instance's GPUs), per precision.
  t << "\nCost (on-demand list prices, src/deploy/instances.cpp; $ per 1M decoded tokens at the decode bound)\n";
  for (Precision p : precisions) {
    const MemoryPlan mp = plan_memory(m, p, w);
    const Instance* best = nullptr;
    double best_tok = 0, best_usd = 0;
    for (const Instance& inst : instance_table()) {
      auto g = find_profile(inst.gpu);
      if (!g || !precision_supported(p, *g)) continue;
      // Weights, KV and activations split over the GPUs; every GPU carries its own runtime overhead.
      const double need = static_cast<double>(mp.total() - mp.runtime) / inst.gpus + static_cast<double>(mp.runtime);
      if (need > static_cast<double>(g->memory_bytes)) continue;
      const double tok = llm ? speed_bound(m, p, *g, w).decode_tokens_s * inst.gpus : 0;
      if (!best || inst.usd_per_hour < best->usd_per_hour) {
        best = &inst;
        best_tok = tok;
        best_usd = usd_per_million_tokens(inst, tok);
      }
    }
    t << "  " << std::left << std::setw(6) << precision_name(p);
    if (!best) {
      t << "no listed instance fits\n";
      continue;
    }
    t << best->provider << " " << best->name << " (" << best->gpus << "x " << best->gpu << ") $"
      << num(best->usd_per_hour, 3) << "/h";
    if (llm) t << ", decode bound " << num(best_tok, 1) << " tok/s -> $" << num(best_usd, 2) << " per 1M tokens";
    t << "\n";
    j["cost"].push_back({{"precision", precision_name(p)}, {"instance", best->name}, {"provider", best->provider},
                         {"gpus", best->gpus}, {"usd_per_hour", best->usd_per_hour},
                         {"decode_tokens_s_bound", best_tok}, {"usd_per_million_tokens", best_usd},
                         {"source", best->source}});
  }
  if (o.json) std::cout << j.dump(2) << "\n";
  else std::cout << t.str();
  return 0;
}

}  // namespace

std::function<int()> add_plan(CLI::App& app) {
  auto o = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "Will a model fit on a GPU, its roofline speed bounds, and its cost");
  auto* model = cmd->add_option("--model", o->model, "Preset: llama-7b, llama-2-7b, llama-13b, mistral-7b, "
                                                      "llama-3-8b, qwen2.5-7b, sd15-unet, sdxl-unet, sd3-transformer");
  auto* config = cmd->add_option("--config", o->config, "A Hugging Face config.json of a decoder LLM");
  model->excludes(config);
  cmd->add_option("--gpu", o->gpu, "Profile key or all (default)");
  cmd->add_option("--precision", o->precision, "all (default), fp32, fp16, bf16, fp8, int8, int4");
  cmd->add_option("--context", o->w.context, "Tokens of KV cache per sequence")->check(at_least(1));
  cmd->add_option("--batch", o->w.batch, "Sequences decoded together")->check(at_least(1));
  cmd->add_option("--prefill", o->w.prefill, "Prefill chunk in tokens (activation workspace)")
      ->check(at_least(1));
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->callback([cmd, o] {
    if (o->model.empty() && o->config.empty()) throw CLI::RequiredError("--model or --config");
    (void)cmd;
  });
  return [o] { return run_plan(*o); };
}

}  // namespace kernelkit::cli
