#include "kernelkit/planner.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <string_view>

namespace kernelkit {
namespace {

constexpr int64_t kMaxGridX = 2147483647, kMaxGridY = 65535;  // CUDA's grid limits (x, y)

constexpr int kWarp = 32;
// Row reductions use 256-thread blocks (the seeds' rule for element-wise and row ops: enough warps per block to hide
// latency, small enough that several blocks share an SM and the grid can be a multiple of the SM count).
constexpr int kRowBlockThreads = 256;
constexpr int kMaxBlockThreads = kRowNormMaxThreads;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// KERNELKIT_TUNE (see planner.hpp): *value becomes the variable's setting for `key` when it names one (which must lie
// in [lo, hi]), and stays the planner's choice otherwise. The whole variable is parsed on each call, so a malformed
// one fails every plan that reads it instead of being ignored.
constexpr std::string_view kTuneKeys[] = {"attn_mw",       "attn_stages", "attn_bn",     "attn_wgmma",
                                          "decode_stages", "decode_splits", "decode_tc", "gemv_stages",
                                          "gemv_kwarps"};

Status tune_value(std::string_view key, int lo, int hi, int* value) {
  const char* env = std::getenv("KERNELKIT_TUNE");
  if (!env) return Status::Ok();
  std::string_view rest(env);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    const std::string_view k = item.substr(0, eq);
    int v = 0;
    bool ok = std::find(std::begin(kTuneKeys), std::end(kTuneKeys), k) != std::end(kTuneKeys) &&
              eq != std::string_view::npos && eq + 1 < item.size();
    if (ok) {  // the whole value, and within int (from_chars leaves v alone when it overflows)
      const auto [end, error] = std::from_chars(item.data() + eq + 1, item.data() + item.size(), v);
      ok = end == item.data() + item.size() && error == std::errc();
    }
    if (!ok) {
      std::string keys;
      for (std::string_view name : kTuneKeys) keys += (keys.empty() ? "" : ", ") + std::string(name);
      return invalid_argument("KERNELKIT_TUNE: '" + std::string(item) + "' is not key=integer with key one of " + keys);
    }
    if (k != key) continue;
    if (v < lo || v > hi)
      return invalid_argument("KERNELKIT_TUNE: " + std::string(item) + " is out of range (" + std::string(key) + " " +
                              std::to_string(lo) + " to " + std::to_string(hi) + ")");
    *value = v;
  }
  return Status::Ok();
}

int next_pow2(int64_t v) {
  int p = 1;
  while (p < v) p <<= 1;
  return p;
}

// One wave of resident blocks (a multiple of the SM count) looping over row groups; fewer when the rows do not fill it.
void size_grid(const DeviceProfile& prof, int64_t rows, LaunchPlan* p) {
  const int64_t row_groups = ceil_div(rows, p->rows_per_block);
  const int64_t wave = static_cast<int64_t>(prof.sms) * p->blocks_per_sm;
  p->sms = prof.sms;
  p->grid = std::max<int64_t>(1, std::min(row_groups, wave));
  p->grid_x = p->grid;  // a 1-D grid: blocks along x loop over the row groups
  const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
  p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
}

Status plan_row_norm(const DeviceProfile& prof, OpId op, const OpShape& s, DType dtype, LaunchPlan* p) {
  const int elem = static_cast<int>(dtype_size(dtype));
  // Vector width: 16 bytes when the hidden size, every pointer and every row stride allow it, else the largest power
  // of two dividing all of them (the gcd rule), down to scalar accesses for odd hidden sizes.
  const int max_vec = 16 / elem;
  const int align_elems = std::max(1, std::min(s.align_bytes, 16) / elem);
  p->vec = std::gcd(static_cast<int>(std::gcd<int64_t, int64_t>(s.hidden, max_vec)), align_elems);

  // Threads per row: about kRowVecsPerThread vectors each; powers of two up to a warp (sub-warp groups reduce with
  // shuffles alone), whole warps beyond, at most one block.
  const int64_t nvec = s.hidden / p->vec;
  const int64_t want = ceil_div(nvec, kRowVecsPerThread);
  const int tpr = want <= kWarp ? next_pow2(want)
                                : static_cast<int>(std::min<int64_t>(ceil_div(want, kWarp) * kWarp, kMaxBlockThreads));
  p->threads_per_row = tpr;
  p->vecs_per_thread = static_cast<int>(ceil_div(nvec, tpr));
  p->rows_per_block = tpr >= kRowBlockThreads ? 1 : kRowBlockThreads / tpr;

  // Shared memory: reduction scratch (one float per warp of each row when a row spans warps), then two stages of the
  // rows (x, and the residual for the fused op) so the next row group loads while this one is reduced. Rows that do
  // not fit read global memory in each pass instead; blocks shrink to fewer rows before giving the stages up.
  // Softmax gathers its statistics in one online pass and stages nothing (row_bytes 0 -> scratch only).
  const bool stage = op_info(op).family == OpFamily::row_norm;
  const int64_t row_bytes = stage ? s.hidden * elem * (op == OpId::fused_add_rms_norm ? 2 : 1) : 0;
  const int64_t budget = std::min(prof.smem_per_block_optin, prof.smem_per_sm);
  auto scratch = [&](int rows) {
    const int warps_per_row = tpr > kWarp ? tpr / kWarp : 0;
    return (static_cast<int64_t>(rows) * warps_per_row * static_cast<int64_t>(sizeof(float)) + 15) / 16 * 16;
  };
  while (p->rows_per_block > 1 && scratch(p->rows_per_block) + 2 * p->rows_per_block * row_bytes > budget &&
         tpr * (p->rows_per_block / 2) >= kWarp)
    p->rows_per_block /= 2;
  p->block_threads = tpr * p->rows_per_block;
  p->stage_offset = scratch(p->rows_per_block);
  p->cached = stage && p->stage_offset + 2 * p->rows_per_block * row_bytes <= budget;
  p->smem_bytes = p->stage_offset + (p->cached ? 2 * p->rows_per_block * row_bytes : 0);
  p->smem_optin = p->smem_bytes > prof.smem_per_block_default;

  // Grid: at most one wave of resident blocks (a multiple of the SM count), each looping over row groups.
  p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, p->smem_bytes, kRowNormRegisters);
  if (p->blocks_per_sm == 0)
    return unsupported("row_norm: a block of " + std::to_string(p->block_threads) + " threads does not fit profile " +
                       prof.key);
  size_grid(prof, s.rows, p);
  return Status::Ok();
}

Status plan_elementwise(const DeviceProfile& prof, const OpShape& s, DType dtype, LaunchPlan* p) {
  const int elem = static_cast<int>(dtype_size(dtype));
  const int max_vec = 16 / elem;  // the same gcd rule as the norms
  const int align_elems = std::max(1, std::min(s.align_bytes, 16) / elem);
  p->vec = std::gcd(static_cast<int>(std::gcd<int64_t, int64_t>(s.hidden, max_vec)), align_elems);
  // Block: threads across a row's vectors (a power of two when the row is shorter than a block, so several rows
  // share it), rows along y. Grid: grid_x blocks span a row; grid.y fills about one wave of resident blocks and each
  // thread walks its column down the rows, kElementwiseVecsPerThread rows per step.
  const int64_t nvec = s.hidden / p->vec;
  p->threads_per_row = nvec >= kElementwiseThreads ? kElementwiseThreads : next_pow2(nvec);
  p->rows_per_block = kElementwiseThreads / p->threads_per_row;
  p->block_threads = kElementwiseThreads;
  p->vecs_per_thread = kElementwiseVecsPerThread;
  p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, 0, 65536 / (kElementwiseThreads * kElementwiseMinBlocks));
  if (p->blocks_per_sm == 0) return unsupported("elementwise: a 256-thread block does not fit profile " + prof.key);
  p->grid_x = ceil_div(nvec, p->threads_per_row);
  if (p->grid_x > kMaxGridX)
    return unsupported("elementwise: rows of " + std::to_string(s.hidden) + " elements are too long for one grid");
  const int64_t row_blocks = ceil_div(s.rows, p->rows_per_block);
  const int64_t wave = static_cast<int64_t>(prof.sms) * p->blocks_per_sm;
  const int64_t grid_y = std::max<int64_t>(1, std::min({row_blocks, wave / p->grid_x, kMaxGridY}));
  p->sms = prof.sms;
  p->grid = p->grid_x * grid_y;
  const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
  p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
  return Status::Ok();
}

// `blocks` blocks of `steps` sequential steps each, `wave` of them resident at once: the steps a part gets when each
// block's steps are split into the count of parts (at most max_parts, never more than the steps) that minimises the
// estimated time, waves x (steps a part + `overhead`), the fewest parts on ties. No split when the blocks alone fill a
// wave. The model counts whole waves: b32 h_kv 8 decode on the H200 (256 blocks, 396 a wave) takes 3 splits (768
// blocks, two full waves) rather than the 2 of a one-wave target (512 blocks, a second wave 30% full).
int64_t split_steps(int64_t blocks, int64_t wave, int64_t steps, int64_t max_parts, int64_t overhead) {
  steps = std::max<int64_t>(steps, 1);
  blocks = std::max<int64_t>(blocks, 1);
  if (blocks >= wave) return steps;
  int64_t best = -1, chunk = steps;
  for (int64_t s = 1; s <= std::min(steps, max_parts); ++s) {
    const int64_t c = ceil_div(steps, s), used = ceil_div(steps, c);  // parts that get steps
    const int64_t cost = ceil_div(blocks * used, wave) * (c + overhead);
    if (best < 0 || cost < best) best = cost, chunk = c;
  }
  return chunk;
}

// Quantizers and weight-only linear ops.
//  - Row quantizers (INT8 per channel / per token): the row-norm work split (one row max, then the row quantized).
//  - INT4 group-wise: one thread per 8 values (one packed word), 256-thread blocks, one wave over all words.
//  - Linear (GEMV, m < kLinearTcMinM): the split-K kernel (see kLinearMaxThreads). Tokens per block: m (1 or 2);
//    4 rows per block. Split-K (k_warps) starts at 2 (so that the blocks-per-SM limit never caps the warps: 2048
//    threads / 32 blocks on sm_80/90, 1024 / 16 on sm_75) and doubles while the grid has fewer warps than can be
//    resident (kLinearWarpsPerSm, the thread and the register limits) and every warp still gets a full warp-wide step
//    of 16-byte chunks. (Always splitting 8 ways was measured slower on the H200: W8A16 m1 n11008 k4096 28.3 us
//    against 22.3 us with this rule. A warp-per-row kernel without split-K, each warp walking whole rows with the next
//    chunks in flight, was slower at every m = 1 shape measured on the H200 in session 5, e.g. W4A16 n11008 k4096
//    18.5 us against 14.2, n28672 k8192 71.0 against 48.1 us, and was removed.)
Status plan_quant(const DeviceProfile& prof, OpId op, const OpShape& s, DType dtype, LaunchPlan* p) {
  const std::string name(op_info(op).name);
  if (op == OpId::quantize_int8_per_channel || op == OpId::quantize_per_token_int8)
    return plan_row_norm(prof, op, s, dtype, p);
  p->sms = prof.sms;
  if (op == OpId::quantize_int4_groupwise) {
    if (s.hidden % 8 != 0)
      return invalid_argument(name + ": k must be a multiple of 8, got " + std::to_string(s.hidden));
    const int64_t words = s.rows * (s.hidden / 8);
    p->vec = 8;
    p->threads_per_row = p->block_threads = kElementwiseThreads;
    p->rows_per_block = 1;
    p->vecs_per_thread = 1;
    p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, 0, 65536 / (kElementwiseThreads * kElementwiseMinBlocks));
    if (p->blocks_per_sm == 0) return unsupported(name + ": a 256-thread block does not fit profile " + prof.key);
    const int64_t wave = int64_t{prof.sms} * p->blocks_per_sm;
    p->grid = std::max<int64_t>(1, std::min<int64_t>(ceil_div(words, p->block_threads), wave));
    p->grid_x = p->grid;  // one-dimensional
    const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
    p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
    return Status::Ok();
  }
  if (dtype == DType::f32) return invalid_argument(name + ": x dtype f32 is not supported (expected f16 or bf16)");
  if (op == OpId::linear_w8a8) {  // tensor-core tiles (see kW8A8Threads); grid x along n, y along m
    const int64_t m = s.rows, n = s.out_features > 0 ? s.out_features : s.hidden;
    p->vec = 16;  // int8 values a 16-byte copy
    p->block_threads = kW8A8Threads;
    p->threads_per_row = kWarp;
    p->rows_per_block = kW8A8Threads / kWarp;
    p->out_rows = kW8A8TileN;
    p->tokens = kW8A8TileM;
    p->smem_bytes = int64_t{kW8A8Stages} * (kW8A8TileM + kW8A8TileN) * kW8A8TileK;
    p->smem_optin = p->smem_bytes > prof.smem_per_block_default;
    p->grid_x = std::max<int64_t>(1, ceil_div(n, kW8A8TileN));
    const int64_t grid_y = std::max<int64_t>(1, ceil_div(m, kW8A8TileM));
    if (grid_y > kMaxGridY || m > kMaxGridX || n > kMaxGridX)
      return unsupported(name + ": m = " + std::to_string(m) + " tokens is more than the grid's " +
                         std::to_string(kMaxGridY) + " tiles of " + std::to_string(kW8A8TileM));
    p->grid = p->grid_x * grid_y;
    p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, p->smem_bytes, 0);
    if (p->blocks_per_sm == 0) return unsupported(name + ": a 48 KB tile block does not fit profile " + prof.key);
    const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
    p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
    return Status::Ok();
  }
  const int bits = op_weight_bits(op);
  const int64_t m = s.rows, k = s.hidden, n = s.out_features > 0 ? s.out_features : s.hidden;
  if (m >= kLinearTcMinM) {  // tensor cores (see kLinearTcMinM); k_warps 0 marks this plan
    p->vec = 16;
    p->block_threads = kLinearTcThreads;
    p->threads_per_row = kWarp;
    p->rows_per_block = kLinearTcThreads / kWarp;
    p->tokens = m <= 16 ? 16 : kLinearTcTileM;
    p->out_rows = kLinearTcTileN;
    p->k_warps = 0;
    p->smem_bytes = int64_t{kLinearTcStages} * kLinearTcTileK *
                    (p->tokens * static_cast<int64_t>(dtype_size(dtype)) + kLinearTcTileN * bits / 8);
    p->smem_optin = p->smem_bytes > prof.smem_per_block_default;
    p->grid_x = std::max<int64_t>(1, ceil_div(n, kLinearTcTileN));
    const int64_t grid_y = ceil_div(m, p->tokens);
    if (grid_y > kMaxGridY || m > kMaxGridX || n > kMaxGridX)
      return unsupported(name + ": m = " + std::to_string(m) + " tokens is more than the grid's " +
                         std::to_string(kMaxGridY) + " tiles of " + std::to_string(p->tokens));
    p->grid = p->grid_x * grid_y;
    p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, p->smem_bytes, 0);
    if (p->blocks_per_sm == 0) return unsupported(name + ": a 48 KB tile block does not fit profile " + prof.key);
    refine_linear_tc_splits(p->blocks_per_sm, m, n, k, p);
    const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
    p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
    return Status::Ok();
  }
  p->vec = 128 / bits;  // weights per 16-byte chunk (16 INT8 or 32 INT4)
  p->tokens = static_cast<int>(std::min<int64_t>(next_pow2(std::max<int64_t>(m, 1)), kLinearMaxTokens));
  p->out_rows = 4;
  const int64_t chunks = ceil_div(k, p->vec);
  const int64_t blocks = ceil_div(n, p->out_rows) * ceil_div(std::max<int64_t>(m, 1), p->tokens);
  const int64_t want_warps = int64_t{prof.sms} * std::min({kLinearWarpsPerSm, prof.max_threads_per_sm / kWarp,
                                                            prof.regs_per_sm / (kLinearRegisters * kWarp)});
  p->k_warps = 2;
  while (p->k_warps * kWarp * 2 <= kLinearMaxThreads && blocks * p->k_warps < want_warps &&
         int64_t{p->k_warps} * 2 * kWarp <= chunks)
    p->k_warps *= 2;
  KK_RETURN_IF_ERROR(tune_value("gemv_kwarps", 1, kLinearMaxThreads / kWarp, &p->k_warps));
  p->threads_per_row = kWarp;
  p->rows_per_block = p->k_warps;
  p->block_threads = kWarp * p->k_warps;
  p->vecs_per_thread = static_cast<int>(ceil_div(chunks, int64_t{kWarp} * p->k_warps));
  // Weights: register prefetch (stages 0), or from kLinearGemvRingMinVecs chunks a thread on sm_80+ the cp.async ring
  // of kLinearGemvRingStages (see there); the ring's shared memory is what the warps' partial sums reuse.
  const int64_t slot_bytes = int64_t{p->out_rows} * p->block_threads * 16;  // one stage: 16 bytes a row a thread
  p->stages = prof.sm >= 80 && p->vecs_per_thread >= kLinearGemvRingMinVecs ? kLinearGemvRingStages : 0;
  KK_RETURN_IF_ERROR(tune_value("gemv_stages", 0, kLinearGemvStages, &p->stages));
  if (p->stages == 1 || p->stages * slot_bytes > prof.smem_per_block_default)
    return invalid_argument("KERNELKIT_TUNE: gemv_stages " + std::to_string(p->stages) + " is not 0 or 2 to " +
                            std::to_string(kLinearGemvStages) + " within 48 KB for a " +
                            std::to_string(p->block_threads) + "-thread block");
  p->smem_bytes = std::max(p->stages * slot_bytes,
                           int64_t{p->k_warps} * p->out_rows * p->tokens * static_cast<int64_t>(sizeof(float)));
  p->smem_optin = false;
  p->grid_x = blocks;  // one-dimensional: token tiles fastest (blocks reading the same weight rows run together)
  p->grid = blocks;
  p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, p->smem_bytes, kLinearRegisters);
  if (p->blocks_per_sm == 0)
    return unsupported(name + ": a " + std::to_string(p->block_threads) + "-thread block does not fit profile " +
                       prof.key);
  const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
  p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
  return Status::Ok();
}

}  // namespace

void refine_linear_tc_splits(int resident_blocks, int64_t m, int64_t n, int64_t k, LaunchPlan* p) {
  // Overhead: the pipeline's prologue (stages - 1 tiles in flight before the first MMA) and the epilogue.
  constexpr int64_t kOverheadTiles = kLinearTcStages;
  if (resident_blocks > 0) p->blocks_per_sm = std::min(p->blocks_per_sm, resident_blocks);
  const int64_t tiles = p->grid / std::max(p->k_splits, 1);
  const int64_t k_tiles = ceil_div(std::max<int64_t>(k, 1), kLinearTcTileK);
  p->k_tiles_per_split = split_steps(tiles, int64_t{p->sms} * p->blocks_per_sm, k_tiles, kLinearTcMaxSplits,
                                     kOverheadTiles);
  p->k_splits = static_cast<int>(ceil_div(k_tiles, p->k_tiles_per_split));
  p->grid = tiles * p->k_splits;
  p->workspace_bytes = p->k_splits > 1 ? p->k_splits * m * n * static_cast<int64_t>(sizeof(float)) : 0;
}

void refine_plan_occupancy(const DeviceProfile& prof, int resident_blocks, int64_t rows, LaunchPlan* p) {
  const int limit = blocks_per_sm(prof, p->block_threads, p->smem_bytes, 0);
  p->blocks_per_sm = std::max(1, std::min(resident_blocks, limit));
  size_grid(prof, rows, p);
}

int blocks_per_sm(const DeviceProfile& prof, int threads, int64_t smem, int regs) {
  if (threads <= 0 || threads > kMaxBlockThreads || threads > prof.max_threads_per_sm) return 0;
  if (smem > prof.smem_per_block_optin) return 0;
  int64_t n = std::min<int64_t>(prof.max_threads_per_sm / threads, prof.max_blocks_per_sm);
  if (smem > 0) n = std::min<int64_t>(n, prof.smem_per_sm / smem);
  if (regs > 0) n = std::min<int64_t>(n, prof.regs_per_sm / (int64_t{regs} * threads));
  return static_cast<int>(n);
}

Status plan_op(const DeviceProfile& prof, OpId op, const OpShape& s, DType dtype, LaunchPlan* p) {
  const OpInfo& info = op_info(op);
  *p = LaunchPlan{};
  p->op = op;
  p->dtype = dtype;
  p->profile = prof.key;
  if (!is_floating(dtype))
    return invalid_argument(std::string(info.name) + ": dtype " + std::string(dtype_name(dtype)) +
                            " is not supported (expected f32, f16 or bf16)");
  if (!prof.supports(dtype))
    return unsupported(std::string(info.name) + ": " + std::string(dtype_name(dtype)) + " is not supported on profile " +
                       prof.key + " (sm_" + std::to_string(prof.sm) + " has no bf16); use f16");
  if (s.hidden <= 0)
    return invalid_argument(std::string(info.name) + ": hidden size must be > 0, got " + std::to_string(s.hidden));
  if (s.rows < 0)
    return invalid_argument(std::string(info.name) + ": rows must be >= 0, got " + std::to_string(s.rows));
  switch (info.family) {
    case OpFamily::row_norm:
    case OpFamily::softmax: return plan_row_norm(prof, op, s, dtype, p);
    case OpFamily::elementwise:
    case OpFamily::rope: return plan_elementwise(prof, s, dtype, p);  // rope: hidden = the vectorized width
    case OpFamily::attention: break;  // tiles from plan_tile, decode splits from plan_decode
    case OpFamily::quant: return plan_quant(prof, op, s, dtype, p);
  }
  return unsupported(std::string(info.name) + ": no planner for this op family");
}

std::string LaunchPlan::to_string() const {
  std::ostringstream os;
  if (k_warps > 0) {
    os << op_info(op).name << " " << dtype_name(dtype) << " on " << profile << ": block 32x" << rows_per_block << " ("
       << block_threads << " threads, split-K " << k_warps << "), grid " << grid << ", "
       << (stages > 0 ? "cp.async ring of " + std::to_string(stages) + ", " : std::string()) << out_rows
       << " rows x " << tokens << " tokens a block, " << vec << " weights a 16-byte load, smem "
       << smem_bytes << " B, " << blocks_per_sm << " blocks/SM, occupancy " << static_cast<int>(occupancy * 100 + 0.5)
       << "%";
    return os.str();
  }
  os << op_info(op).name << " " << dtype_name(dtype) << " on " << profile << ": block " << threads_per_row << "x"
     << rows_per_block << " (" << block_threads << " threads), grid " << grid;
  if (grid_x != grid) os << " (" << grid_x << "x" << grid / grid_x << ")";
  if (k_splits > 1) os << ", k split " << k_splits << " ways (" << k_tiles_per_split << " tiles each)";
  os << ", vec " << vec << ", "
     << vecs_per_thread << " vec/thread, ";
  if (op_info(op).family == OpFamily::row_norm)
    os << (cached ? "rows staged in smem" : "rows re-read (too long to stage)") << ", ";
  os << "smem " << smem_bytes
     << " B" << (smem_optin ? " (opt-in)" : "") << ", " << blocks_per_sm << " blocks/SM, occupancy "
     << static_cast<int>(occupancy * 100 + 0.5) << "%";
  return os.str();
}

// ---- Tiles for the compute-bound families --------------------------------------------------------------------------

namespace {
struct TileSeed {
  int min_sm;
  int attn_m, attn_n, attn_stages;
  int attn_mw;  // 16-row MMA tiles a warp owns (head_dim <= 128; 1 above): warps = attn_m / (16 attn_mw)
  int mm_m, mm_n, mm_k, mm_stages, mm_warps;
};
// The seeds' per-arch table, newest first. sm_75 has no cp.async, so its pipelines are two register-staged buffers.
constexpr TileSeed kTileSeeds[] = {
    {90, 128, 64, 2, 2, 128, 128, 32, 4, 8},
    {80, 128, 64, 2, 2, 128, 128, 32, 3, 8},
    {75, 64, 32, 2, 1, 64, 64, 32, 2, 4},
};
}  // namespace

Status plan_tile(const DeviceProfile& prof, TileFamily family, DType dtype, int head_dim, TilePlan* t,
                 bool sm90a_code) {
  *t = TilePlan{};
  if (dtype != DType::f16 && dtype != DType::bf16)
    return invalid_argument("tile plan: dtype must be f16 or bf16, got " + std::string(dtype_name(dtype)));
  if (!prof.supports(dtype))
    return unsupported("tile plan: bf16 is not supported on profile " + prof.key + "; use f16");
  const TileSeed* seed = nullptr;
  for (const auto& s : kTileSeeds)
    if (prof.sm >= s.min_sm) {
      seed = &s;
      break;
    }
  if (!seed) return unsupported("tile plan: sm_" + std::to_string(prof.sm) + " is older than sm_75");
  const int64_t e = static_cast<int64_t>(dtype_size(dtype));
  int mw = 1, planned_mw = 1;  // attention: 16-row MMA tiles a warp owns (forced by KERNELKIT_TUNE, or planned)
  auto smem = [&](const TilePlan& p) -> int64_t {
    if (family == TileFamily::attention)  // Q tile + `stages` buffers of K and V tiles
      return e * (static_cast<int64_t>(p.block_m) * head_dim + 2LL * p.stages * p.block_n * head_dim);
    return e * p.stages * static_cast<int64_t>(p.block_m + p.block_n) * p.block_k;  // A and B tiles per stage
  };
  if (family == TileFamily::attention) {
    if (head_dim != 64 && head_dim != 128 && head_dim != 256)
      return invalid_argument("tile plan: head_dim must be 64, 128 or 256, got " + std::to_string(head_dim));
    // The wgmma prefill fed by TMA is the default where it can run (kAttnWgmmaRows): sm_90 profiles, head_dim 64
    // and 128, sm_90a code for the device. attn_wgmma=0 / 1 / 2 forces the mma.sync kernel, the cp.async-fed or
    // the TMA-fed wgmma one.
    const bool wgmma_here = prof.sm == 90 && head_dim <= 128;
    int wgmma = wgmma_here && sm90a_code ? 2 : 0;
    KK_RETURN_IF_ERROR(tune_value("attn_wgmma", 0, 2, &wgmma));
    if (wgmma) {  // see kAttnWgmmaRows: two warpgroups, two K/V buffers, Q and each buffer 1024-byte aligned
      if (!wgmma_here)
        return unsupported("KERNELKIT_TUNE attn_wgmma: the wgmma prefill has head_dim 64 and 128 on sm_90 profiles "
                           "only, not head_dim " + std::to_string(head_dim) + " on profile " + prof.key);
      if (!sm90a_code)
        return unsupported("KERNELKIT_TUNE attn_wgmma: the wgmma prefill needs a build with sm_90a code (arch list "
                           "with 90 or native) on a compute capability 9.0 device");
      int bn = wgmma == 2 ? kAttnWgmmaTmaKeys : kAttnWgmmaKeys;
      KK_RETURN_IF_ERROR(tune_value("attn_bn", 64, 128, &bn));
      if (bn != 64 && bn != 128)
        return invalid_argument("KERNELKIT_TUNE: attn_bn " + std::to_string(bn) +
                                " is not 64 or 128, the wgmma prefill's tiles (attn_wgmma=0: the mma.sync kernel's)");
      int stages = 0, rows_a_warp = 0;  // the kernel has two buffers and one row tile a warp: nothing to force
      KK_RETURN_IF_ERROR(tune_value("attn_stages", 1, kAttnMaxStages, &stages));
      KK_RETURN_IF_ERROR(tune_value("attn_mw", 1, 2, &rows_a_warp));
      if ((stages != 0 && stages != 2) || rows_a_warp > 1)
        return invalid_argument("KERNELKIT_TUNE: the wgmma prefill has 2 K/V buffers and one 16-row tile a warp; "
                                "attn_stages / attn_mw cannot change them (attn_wgmma=0: the mma.sync kernel)");
      *t = {kAttnWgmmaRows, bn, head_dim, 2, kAttnWgmmaRows / 16, 0, false, true, wgmma == 2};
      t->smem_bytes = e * (int64_t{kAttnWgmmaRows} + 4 * bn) * head_dim + 1024;
      if (t->smem_bytes > prof.smem_per_block_optin)
        return unsupported("tile plan: the wgmma prefill's " + std::to_string(t->smem_bytes) +
                           " bytes exceed profile " + prof.key + "'s " + std::to_string(prof.smem_per_block_optin));
      t->smem_optin = t->smem_bytes > prof.smem_per_block_default;
      return Status::Ok();
    }
    *t = {seed->attn_m, seed->attn_n, head_dim, seed->attn_stages, 0, 0, false};
    planned_mw = mw = head_dim <= 128 ? seed->attn_mw : 1;
    KK_RETURN_IF_ERROR(tune_value("attn_mw", 1, 2, &mw));
    // Two row tiles a warp at head_dim 128 hold 2 x 128 fp32 of O per lane: kAttnWideKeys-key tiles on sm_90 (the
    // measured choice), 32 below (S for 64 keys on top spills more there).
    if (mw == 2 && head_dim == 128 && prof.sm < 90) t->block_n = std::min(t->block_n, 32);
  } else {
    *t = {seed->mm_m, seed->mm_n, seed->mm_k, seed->mm_stages, seed->mm_warps, 0, false};
  }
  // Shrink until it fits the opt-in maximum: fewer stages first (keeps the MMA shape), then the N tile, then M.
  while (smem(*t) > prof.smem_per_block_optin) {
    if (t->stages > 1) --t->stages;
    else if (t->block_n > 32) t->block_n /= 2;  // attention kernels exist for block_n 64 and 32
    else if (t->block_m > 64) t->block_m /= 2;
    else if (family == TileFamily::attention) break;  // 64 x 32 is the smallest compiled attention tile
    else if (t->block_n > 16) t->block_n /= 2;
    else if (t->block_m > 16) t->block_m /= 2;
    else break;
  }
  if (smem(*t) > prof.smem_per_block_optin)
    return unsupported("tile plan: no tile fits " + std::to_string(prof.smem_per_block_optin) + " bytes");
  // Attention: a forced K/V depth or key tile must fit as is (the shrinking above is the planner's own); one warp per
  // mw x 16 query rows (the MMA's M), each keeping its rows of S, P and O in registers. Two tiles a warp exist for
  // 128-row blocks at head_dim 64, and 128 with 32-key tiles (the registers: see above) or 64 (kAttnWideKeys).
  if (family == TileFamily::attention) {
    KK_RETURN_IF_ERROR(tune_value("attn_stages", 1, kAttnMaxStages, &t->stages));
    KK_RETURN_IF_ERROR(tune_value("attn_bn", 32, 64, &t->block_n));
    if (t->block_n != 32 && t->block_n != 64)
      return invalid_argument("KERNELKIT_TUNE: attn_bn " + std::to_string(t->block_n) + " is not 32 or 64");
    if (t->block_m == 64 && t->block_n == 64)
      return unsupported("tile plan: no 64x64 attention kernel (profile " + prof.key + "'s 64-row tiles take 32 keys)");
    if (smem(*t) > prof.smem_per_block_optin)
      return unsupported("tile plan: " + std::to_string(t->stages) + " K/V stages of a " + std::to_string(t->block_m) +
                         "x" + std::to_string(t->block_n) + " tile need " + std::to_string(smem(*t)) +
                         " bytes, more than profile " + prof.key + "'s " + std::to_string(prof.smem_per_block_optin));
    if (mw == 2 && t->block_m != 128 && planned_mw == 2) mw = 1;  // the planner's choice, for a tile shrunk below it
    if (mw == 2 && (t->block_m != 128 || head_dim > 128))
      return unsupported("tile plan: no kernel with 2 row tiles a warp for head_dim " + std::to_string(head_dim));
    t->warps = t->block_m / (16 * mw);
  }
  t->smem_bytes = smem(*t);
  t->smem_optin = t->smem_bytes > prof.smem_per_block_default;
  return Status::Ok();
}

Status plan_decode(const DeviceProfile& prof, int head_dim, int64_t batch, int64_t kv_heads, int64_t rows,
                   int64_t rows_all, int64_t capacity, DecodePlan* p, int resident_blocks) {
  *p = DecodePlan{};
  if (head_dim != 64 && head_dim != 128 && head_dim != 256)
    return invalid_argument("decode plan: head_dim must be 64, 128 or 256, got " + std::to_string(head_dim));
  // Tensor cores wherever the variant has a kernel (head_dim 64 and 128): see kDecodeTcTileKeys for the measurement.
  int tc = head_dim <= 128 ? 1 : 0;
  KK_RETURN_IF_ERROR(tune_value("decode_tc", 0, 1, &tc));
  if (tc && head_dim > 128)
    return unsupported("decode plan: the tensor-core variant (decode_tc=1) has head_dim 64 and 128 only, got " +
                       std::to_string(head_dim));
  p->tensor_cores = tc == 1;
  const int warp_tile_keys = p->tensor_cores ? kDecodeTcTileKeys : kDecodeWarpTileElems / head_dim;
  p->block_n = warp_tile_keys * (kDecodeThreads / 32);
  const int64_t r = std::max<int64_t>(rows, 1);
  p->rows_per_block = r == 1 ? 1 : r <= 4 ? 4 : kDecodeMaxRows;
  p->row_groups = ceil_div(r, p->rows_per_block);
  // Shared memory: `stages` K and V tiles per warp (2-byte elements), reused after the loop for the warps' merge
  // (fp32 O, max and sum per row). Two stages: the deeper rings measured no faster (see kDecodeMaxStages).
  const int64_t warps = kDecodeThreads / 32;
  const int64_t merge = warps * p->rows_per_block * (head_dim + 2) * 4;
  auto smem_for = [&](int stages) { return std::max(warps * stages * 2 * warp_tile_keys * head_dim * 2, merge); };
  if (blocks_per_sm(prof, kDecodeThreads, smem_for(2), 0) == 0)
    return unsupported("decode plan: a decode block does not fit profile " + prof.key);
  p->stages = 2;
  KK_RETURN_IF_ERROR(tune_value("decode_stages", 2, kDecodeMaxStages, &p->stages));
  if (smem_for(p->stages) > prof.smem_per_block_optin)
    return invalid_argument("KERNELKIT_TUNE: decode_stages " + std::to_string(p->stages) + " needs " +
                            std::to_string(smem_for(p->stages)) + " bytes, more than profile " + prof.key + "'s " +
                            std::to_string(prof.smem_per_block_optin));
  p->smem_bytes = smem_for(p->stages);
  p->smem_optin = p->smem_bytes > prof.smem_per_block_default;
  p->blocks_per_sm = blocks_per_sm(prof, kDecodeThreads, p->smem_bytes, 0);
  if (resident_blocks > 0) p->blocks_per_sm = std::min(p->blocks_per_sm, resident_blocks);
  // Splits: see split_steps (a block's prologue, merge and partial writes count as 2 tile steps).
  constexpr int64_t kDecodeBlockOverheadTiles = 2;
  const int64_t blocks = batch * kv_heads * p->row_groups;
  const int64_t tiles = std::max<int64_t>(1, ceil_div(capacity, p->block_n));
  int64_t chunk_tiles = split_steps(blocks, static_cast<int64_t>(prof.sms) * p->blocks_per_sm, tiles,
                                    kDecodeMaxSplits, kDecodeBlockOverheadTiles);
  int splits = 0;  // KERNELKIT_TUNE decode_splits: at most that many (tiles are not cut below one a split)
  KK_RETURN_IF_ERROR(tune_value("decode_splits", 1, kDecodeMaxSplits, &splits));
  if (splits > 0) chunk_tiles = ceil_div(tiles, splits);
  p->splits = static_cast<int>(ceil_div(tiles, chunk_tiles));
  p->chunk = chunk_tiles * p->block_n;
  p->grid = p->splits * blocks;
  p->workspace_bytes = p->splits > 1 ? p->splits * rows_all * (head_dim + 1) * static_cast<int64_t>(sizeof(float)) : 0;
  return Status::Ok();
}

std::string DecodePlan::to_string() const {
  std::ostringstream os;
  os << "decode" << (tensor_cores ? " (tensor cores)" : "") << ": " << splits << " split" << (splits == 1 ? "" : "s")
     << " of " << chunk << " keys, tiles of "
     << block_n << " keys, " << row_groups << " row group" << (row_groups == 1 ? "" : "s") << " of "
     << rows_per_block << " row" << (rows_per_block == 1 ? "" : "s") << ", grid " << grid
     << ", " << stages << " stages, smem " << smem_bytes << " B" << (smem_optin ? " (opt-in)" : "") << ", "
     << blocks_per_sm << " blocks/SM";
  if (workspace_bytes) os << ", workspace " << workspace_bytes << " B";
  return os.str();
}

std::string TilePlan::to_string() const {
  std::ostringstream os;
  os << block_m << "x" << block_n << " (k " << block_k << "), " << stages << " stage" << (stages == 1 ? "" : "s")
     << ", " << warps << " warps" << (wgmma ? tma ? " (wgmma, TMA)" : " (wgmma)" : "") << ", smem " << smem_bytes / 1024
     << " KB" << (smem_optin ? " (opt-in)" : "");
  return os.str();
}

}  // namespace kernelkit
