// `kernelkit info`: the GPU's properties, the matched profile and the planner's launch configuration for every op.
#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <tuple>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "kernelkit/model_plan.hpp"
#include "kernelkit/op_info.hpp"
#include "kernelkit/planner.hpp"
#include "kernelkit/runtime.hpp"

namespace kernelkit::cli {
namespace {

struct InfoOptions {
  std::string profile;
  int device = 0;
  int64_t rows = 4096, hidden = 4096;
  bool json = false;
  bool roofline = false;
};

// Roofline bounds of the attention and quantized-linear benchmark shapes (bench/op_baselines.py) on a profile: the
// minimal bytes over the datasheet bandwidth and the FLOPs over the tensor-core peak, each derated to what is
// achievable (the same factors as `kernelkit plan`). For a GPU we cannot run on (the T4), this is what a kernel could
// at best do there. Dense fp16 linear (F.linear) is listed as the weight-only rows' reference.
void roofline_section(const DeviceProfile& prof, std::ostringstream& text, nlohmann::json& j) {
  const DType dt = prof.recommended_half_dtype();
  const double bw = prof.hbm_gbps * 1e9 * kAchievableBandwidth;
  auto bound_us = [&](double bytes, double flops, double tflops) {
    return 1e6 * std::max(bytes / bw, flops / (tflops * 1e12 * kAchievableTensor));
  };
  text << "\nRoofline bounds (" << dtype_name(dt) << "; bandwidth " << prof.hbm_gbps << " GB/s x "
       << kAchievableBandwidth << ", tensor peak " << prof.fp16_tc_tflops << " TFLOP/s (int8 " << prof.int8_tc_tops
       << " TOPS) x " << kAchievableTensor << "):\n";
  auto row = [&](const std::string& op, const std::string& shape, double bytes, double flops, double tflops) {
    const double us = bound_us(bytes, flops, tflops);
    text << "  " << std::left << std::setw(20) << op << std::setw(26) << shape << std::right << std::fixed
         << std::setprecision(1) << std::setw(10) << us << " us  " << std::setprecision(2) << std::setw(8)
         << bytes / 1e6 << " MB  " << std::setw(9) << flops / 1e9 << " GFLOP\n";
    text.unsetf(std::ios::fixed);
    j["roofline"].push_back({{"op", op}, {"shape", shape}, {"bytes", bytes}, {"flops", flops}, {"bound_us", us}});
  };
  for (const auto& [b, s, hk, d, causal] : {std::tuple{1, 4096, 32, 128, true}, {4, 2048, 32, 128, false}}) {
    const AttentionShape a{b, s, s, 32, hk, d, causal};
    row("attention", "b" + std::to_string(b) + " h32/" + std::to_string(hk) + " s" + std::to_string(s) + " d" +
                         std::to_string(d) + (causal ? " causal" : ""),
        static_cast<double>(attention_bytes(OpId::attention, a, dt)), attention_flops(OpId::attention, a),
        prof.fp16_tc_tflops);
  }
  for (int64_t b : {1, 32}) {
    AttentionShape a{b, 1, 4096, 32, 8, 128, false};
    row("decode_attention", "b" + std::to_string(b) + " h32/8 s4096 d128",
        static_cast<double>(attention_bytes(OpId::decode_attention, a, dt)),
        attention_flops(OpId::decode_attention, a), prof.fp16_tc_tflops);
    if (prof.supports(DType::f8e4m3)) {  // the same decode over an e4m3 cache: half the K/V bytes
      a.kv_dtype = DType::f8e4m3;
      row("decode_attention", "b" + std::to_string(b) + " h32/8 s4096 d128 e4m3",
          static_cast<double>(attention_bytes(OpId::decode_attention, a, dt)),
          attention_flops(OpId::decode_attention, a), prof.fp16_tc_tflops);
    }
  }
  for (int64_t m : {1, 16, 64, 256}) {
    const int64_t n = 11008, k = 4096;
    const std::string shape = "m" + std::to_string(m) + " n11008 k4096";
    row("F.linear (dense)", shape, 2.0 * static_cast<double>(n * k + m * k + m * n), 2.0 * m * n * k,
        prof.fp16_tc_tflops);
    for (OpId id : {OpId::linear_w8a16, OpId::linear_w4a16, OpId::linear_w8a8}) {
      OpShape q{m, k, 1, 16};
      q.out_features = n;
      q.group = id == OpId::linear_w4a16 ? 128 : 0;
      row(std::string(op_info(id).name), shape, static_cast<double>(op_bytes(id, q, dt)), op_flops(id, q),
          id == OpId::linear_w8a8 ? prof.int8_tc_tops : prof.fp16_tc_tflops);
    }
  }
}

nlohmann::json profile_json(const DeviceProfile& p) {
  return {{"key", p.key},
          {"name", p.name},
          {"source", p.source},
          {"sm", p.sm},
          {"sms", p.sms},
          {"max_threads_per_sm", p.max_threads_per_sm},
          {"max_blocks_per_sm", p.max_blocks_per_sm},
          {"smem_per_sm_bytes", p.smem_per_sm},
          {"smem_per_block_default_bytes", p.smem_per_block_default},
          {"smem_per_block_optin_bytes", p.smem_per_block_optin},
          {"l2_bytes", p.l2_bytes},
          {"bandwidth_gbps", p.hbm_gbps},
          {"memory_bytes", p.memory_bytes},
          {"fp32_tflops", p.fp32_tflops},
          {"fp16_tensor_tflops", p.fp16_tc_tflops},
          {"bf16", p.bf16},
          {"tf32", p.tf32},
          {"fp8", p.fp8},
          {"tma", p.tma},
          {"recommended_dtype", std::string(dtype_name(p.recommended_half_dtype()))}};
}

int run_info(const InfoOptions& o) {
  auto prof = resolve_profile(o.profile, o.device);
  if (!prof) return 1;
  const DType dtype = prof->recommended_half_dtype();
  const OpShape shape{o.rows, o.hidden, 1, 16};
  nlohmann::json j;
  j["profile"] = profile_json(*prof);
  j["built_with_cuda"] = built_with_cuda();
  j["cuda_devices"] = cuda_device_count();

  std::ostringstream text;
  text << describe(*prof);
  text << "\nLaunch plans for " << o.rows << " x " << o.hidden << " " << dtype_name(dtype) << ":\n";
  for (const OpInfo& op : op_table()) {
    if (op.family == OpFamily::attention) continue;  // not a row op: its tiles are listed below
    LaunchPlan plan;
    const Status s = plan_op(*prof, op.id, shape, dtype, &plan);
    text << "  " << std::left << std::setw(op_column_width()) << op.name << (s.ok() ? plan.to_string() : s.to_string())
         << "\n";
    j["plans"][std::string(op.name)] =
        s.ok() ? nlohmann::json{{"block", {plan.threads_per_row, plan.rows_per_block}},
                                {"grid", plan.grid},
                                {"vec", plan.vec},
                                {"vecs_per_thread", plan.vecs_per_thread},
                                {"cached", plan.cached},
                                {"smem_bytes", plan.smem_bytes},
                                {"blocks_per_sm", plan.blocks_per_sm},
                                {"occupancy", plan.occupancy},
                                {"bytes", op_bytes(op.id, shape, dtype)},
                                {"flops", op_flops(op.id, shape)},
                                {"memory_bound", op_memory_bound(op.id, shape, dtype, *prof)}}
               : nlohmann::json{{"error", s.to_string()}};
  }
  text << "Tiles (" << dtype_name(dtype) << "):\n";
  for (int d : {64, 128, 192, 256}) {
    TilePlan t;
    const Status s = plan_tile(*prof, TileFamily::attention, dtype, d, &t);
    text << "  attention d" << std::setw(4) << d << "      " << (s.ok() ? t.to_string() : s.to_string()) << "\n";
    if (s.ok())
      j["tiles"]["attention_d" + std::to_string(d)] = {{"block_m", t.block_m}, {"block_n", t.block_n},
                                                       {"warps", t.warps}, {"stages", t.stages},
                                                       {"smem_bytes", t.smem_bytes}};
  }
  // Decode: one sequence of 32768 cached keys, 32 query heads on 8 KV heads (a Llama-3-8B step).
  DecodePlan dp;
  if (plan_decode(*prof, 128, 1, 8, 4, 32, 32768, &dp).ok()) {
    text << "  decode d128 (1 x 32768 keys, 32/8 heads)  " << dp.to_string() << "\n";
    j["tiles"]["decode_d128"] = {{"splits", dp.splits}, {"chunk", dp.chunk}, {"block_n", dp.block_n},
                                 {"grid", dp.grid}, {"stages", dp.stages}, {"smem_bytes", dp.smem_bytes}};
  }
  TilePlan mm;
  if (plan_tile(*prof, TileFamily::matmul, dtype, 0, &mm).ok()) {
    text << "  matmul              " << mm.to_string() << "\n";
    j["tiles"]["matmul"] = {{"block_m", mm.block_m}, {"block_n", mm.block_n}, {"block_k", mm.block_k},
                            {"stages", mm.stages}, {"smem_bytes", mm.smem_bytes}};
  }
  if (!prof->bf16) text << "bf16: unsupported on this profile; kernelkit refuses bf16 here (use f16).\n";
  if (o.roofline) roofline_section(*prof, text, j);
  if (o.json) std::cout << j.dump(2) << "\n";
  else std::cout << text.str();
  return 0;
}

}  // namespace

std::function<int()> add_info(CLI::App& app) {
  auto o = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand("info", "Show the GPU (or a named profile), its facts and the launch plans");
  cmd->add_option("--profile", o->profile, "Profile key instead of the live GPU: t4, a10g, l4, a100, h100, h200, ...");
  cmd->add_option("--device", o->device, "CUDA device index")->check(at_least(0));
  cmd->add_option("--rows", o->rows, "Rows of the example shape for the plans")->check(at_least(1));
  cmd->add_option("--hidden", o->hidden, "Hidden size of the example shape for the plans")->check(at_least(1));
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->add_flag("--roofline", o->roofline,
                "Also the roofline bounds of the attention and quantized-linear benchmark shapes on this profile");
  return [o] { return run_info(*o); };
}

}  // namespace kernelkit::cli
