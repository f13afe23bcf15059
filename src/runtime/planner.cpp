#include "kernelkit/planner.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <string_view>

#include "ops/quant/quant_plan.hpp"
#include "runtime/plan_rules.hpp"

namespace kernelkit {
namespace plan {
namespace {

// Row reductions use 256-thread blocks (the seeds' rule for element-wise and row ops: enough warps per block to hide
// latency, small enough that several blocks share an SM and the grid can be a multiple of the SM count).
constexpr int kRowBlockThreads = 256;
// The lean kernels take rows of kRowLeanMinThreads threads or more, one row a block, also below kRowBlockThreads
// (rows of 128 threads, where the general kernel puts two in a block, and of 192). H100, bf16, one process, outputs
// kept per buffer set (us, lean / general kernel; Liger-Kernel's one-row programs): layer_norm 2 x 1024 x 2048 8.45
// / 10.6 (9.14), 2 x 4096 x 3072 37.4 / 40.8 (38.5); softmax 7.80 / 8.45 (7.93), 37.1 / 37.9 (35.4); rms_norm 8.13
// / 8.46 (8.25), 36.8 / 37.8 (35.8); fused_add_rms_norm 14.1 / 14.5 (13.9), 70.6 / 71.3 (70.3); rows of 256 threads and
// more unchanged. Rows of 64 threads (hidden 1024) are not measured.
constexpr int kRowLeanMinThreads = 128;

}  // namespace

// Every KERNELKIT_TUNE key of every family (docs/benchmarking.md lists what each forces).
constexpr std::string_view kTuneKeys[] = {
    "attn_mw",       "attn_stages", "attn_bn",      "attn_wgmma",     "decode_stages",   "decode_splits",
    "decode_tc",     "gemv_stages", "gemv_kwarps",  "rows_vpt",       "rows_waves",      "ew_waves",
    "softmax_stage", "rows_held",   "decode_waves", "rows_cap",       "decode_f16mma",   "rows_onepass",
    "fp8_gemv",      "gemv_mma",    "rows_lean",    "rows_lean_min",  "gemv_mma_mtiles", "gemv_pdl",
    "attn_pv_n",     "attn_slack",  "attn_bm",      "attn_varlen_ws", "attn_fallback",   "ew_one_row",
    "decode_rotate", "decode_kt"};

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

void size_grid(const DeviceProfile& prof, int64_t rows, LaunchPlan* p) {
  const int64_t row_groups = ceil_div(rows, p->rows_per_block);
  const int64_t wave = static_cast<int64_t>(prof.sms) * p->blocks_per_sm;
  p->sms = prof.sms;
  p->grid = std::max<int64_t>(1, p->waves == 0 ? row_groups : std::min(row_groups, wave * p->waves));
  p->grid_x = p->grid;  // a 1-D grid: blocks along x loop over the row groups
  const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
  p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
}

Status plan_rows(const DeviceProfile& prof, OpId op, const OpShape& s, DType dtype, LaunchPlan* p) {
  const int elem = static_cast<int>(dtype_size(dtype));
  // Vector width: 16 bytes when the hidden size, every pointer and every row stride allow it, else the largest power
  // of two dividing all of them (the gcd rule), down to scalar accesses for odd hidden sizes.
  const int max_vec = 16 / elem;
  const int align_elems = std::max(1, std::min(s.align_bytes, 16) / elem);
  p->vec = std::gcd(static_cast<int>(std::gcd<int64_t, int64_t>(s.hidden, max_vec)), align_elems);

  // Threads per row: about kRowVecsPerThread vectors each; powers of two up to a warp (sub-warp groups reduce with
  // shuffles alone), whole warps beyond, at most one block.
  const int64_t nvec = s.hidden / p->vec;
  // Rows too few to fill half of the GPU's threads at kRowVecsPerThread spread over twice the threads: the H200's
  // norms at 16 x 4096 bf16 take 2.6 us against 3.3, 2048 x 2048 7.7 against 8.5 (at 2048 x 4096, which fills it,
  // 14.4 against 14.0).
  // Softmax always takes 2 a thread: its rows live in registers as fp32, and the 2-vector kernel's 32 registers (57 at
  // 4) double the resident blocks: at 65536 x 4096 bf16 308 us against 348, 16 x 4096 2.4 against 3.1.
  // Held rows (kRowHeldVecs vectors a thread unless rows_vpt says otherwise): the RMS norms' up to
  // kRowHeldMaxThreads threads a row, and layer_norm's where the lean kernel takes them. KERNELKIT_TUNE rows_held=0
  // holds none; 1 every norm's that fits a block.
  const bool norm = op_info(op).family == OpFamily::norm;
  const bool layer = op == OpId::layer_norm || op == OpId::ada_layer_norm;
  int rows_held = -1;
  KK_RETURN_IF_ERROR(tune_value("rows_held", 0, 1, &rows_held));
  auto row_threads = [](int64_t want) {
    return want <= kWarp ? next_pow2(want)
                         : static_cast<int>(std::min<int64_t>(ceil_div(want, kWarp) * kWarp, kRowNormMaxThreads));
  };
  // The lean kernels (LaunchPlan::lean): rows of whole warps at kRowHeldVecs vectors a thread, one row a block
  // (kRowLeanMinThreads threads or more), at most kRowHeldMaxThreads, of 16-byte vectors. By default rms_norm,
  // fused_add_rms_norm and softmax take them uncapped (38 and 32 registers) and layer_norm, whose rows they then
  // hold, with a 40-register cap (a minimum of 3 512-thread blocks): H100, bf16, one process (us, lean / general):
  // rms_norm 16 x 4096 1.89 / 2.46, 2048 x 4096 14.1 / 15.3, 2 x 4096 x 3072 37.0 / 38.0; fused_add 2.21 / 2.72, 25.9 /
  // 26.9; layer_norm 2.31 / 2.89, 14.5 / 17.1, 37.5 / 40.9; softmax 2.14 / 2.41, 14.4 / 15.0; 16384 x 8192 and 65536 x
  // 4096 within 1% (layer_norm uncapped: 216 / 185 at 16384 x 8192). KERNELKIT_TUNE rows_lean=0: the general kernels;
  // N (1-4): a minimum of N blocks for the norms (1 uncapped, 4 32 registers).
  // KERNELKIT_TUNE rows_lean_min=N (32-256): rows of N threads or more take the lean kernel (kRowLeanMinThreads).
  int lean_min = kRowLeanMinThreads;
  KK_RETURN_IF_ERROR(tune_value("rows_lean_min", kWarp, kRowBlockThreads, &lean_min));
  const int held_threads = row_threads(ceil_div(nvec, kRowHeldVecs));
  const bool lean_shape =
      held_threads % kWarp == 0 && held_threads >= lean_min && held_threads <= kRowHeldMaxThreads && p->vec == max_vec;
  const bool softmax = op_info(op).family == OpFamily::softmax;
  const bool lean_op = op == OpId::rms_norm || op == OpId::fused_add_rms_norm || op == OpId::layer_norm || softmax;
  int lean = -1;
  KK_RETURN_IF_ERROR(tune_value("rows_lean", 0, 4, &lean));
  if (lean == -1) lean = op == OpId::layer_norm ? 3 : 1;
  if (!lean_op || !lean_shape) lean = 0;
  const bool fits_held = ceil_div(nvec, kRowHeldVecs) <= kRowHeldMaxThreads;
  const bool hold = norm && (rows_held == 1 || (rows_held == -1 && fits_held && (!layer || lean > 0)));
  const bool few_rows = s.rows * ceil_div(nvec, kRowVecsPerThread) < int64_t{prof.sms} * prof.max_threads_per_sm / 2;
  const bool half = op_info(op).family == OpFamily::softmax || (few_rows && norm);
  int vecs_target = hold ? kRowHeldVecs : half ? kRowVecsPerThread / 2 : kRowVecsPerThread;
  KK_RETURN_IF_ERROR(tune_value("rows_vpt", 1, 16, &vecs_target));
  const int tpr = row_threads(ceil_div(nvec, vecs_target));
  p->threads_per_row = tpr;
  p->vecs_per_thread = static_cast<int>(ceil_div(nvec, tpr));
  const bool lean_split = lean > 0 && (hold || softmax) && tpr == held_threads;  // the lean kernel's: a row a block
  p->rows_per_block = tpr >= kRowBlockThreads || lean_split ? 1 : kRowBlockThreads / tpr;

  // Shared memory: reduction scratch (when a row spans warps), then two stages of the rows (x, and the residual for
  // the fused op) so the next row group loads while this one is reduced. Rows that do not fit read global memory in
  // each pass instead; blocks shrink to fewer rows before giving the stages up.
  // Softmax holds a row of at most kRowVecsPerThread vectors a thread in registers and stages nothing (row_bytes 0 ->
  // scratch only) unless KERNELKIT_TUNE's softmax_stage=1 asks for the norms' staging.
  // Held norm rows (at most kRowHeldVecs vectors a thread) stage nothing. Held bf16 rms_norm rows that the lean kernel
  // does not take run the general kernel capped at 32 registers (8 blocks of 256 threads an SM where 47 registers allow
  // 5; no spill on sm_80 / sm_90, where the f16 kernel, converting element by element, spills 24-52 bytes): H100, one
  // process, 16384 x 8192 182 against 200 us (torch.compile 182), 2 x 1024 x 2048 8.5 against 9.4, the other shapes
  // within 1%. KERNELKIT_TUNE rows_cap=0: the uncapped kernel; rows_cap=2 (an experiment) caps the bf16 norm +
  // quantization kernels too: uncapped, their 48 registers allow 5 blocks an SM, 40 KB of rows in flight where 8 blocks
  // would hold 64 (rms_norm_quant_fp8 measured 60% of the copy ceiling).
  p->held = hold && p->vecs_per_thread <= kRowHeldVecs ? kRowHeldVecs : 0;
  int rows_cap = 1;
  KK_RETURN_IF_ERROR(tune_value("rows_cap", 0, 2, &rows_cap));
  const bool capped = op == OpId::rms_norm || (rows_cap == 2 && op_quant_out_dtype(op).has_value());
  p->min_blocks = rows_cap >= 1 && capped && p->held > 0 && dtype == DType::bf16 ? 2 : 1;
  // The lean kernel where the plan is the row split it was chosen for (rows_held / rows_vpt may change it).
  const bool lean_rows = softmax ? p->vecs_per_thread <= kRowHeldVecs : p->held > 0;
  p->lean = lean_rows && tpr == held_threads && p->rows_per_block == 1 ? lean : 0;
  if (p->lean > 0) p->min_blocks = 1;
  // An experiment for the norm + quantization ops (rms_norm_quant_fp8 at 60% of the copy ceiling, two reductions a
  // row): KERNELKIT_TUNE rows_onepass=1 takes max |y| from the sum's pass (see LaunchPlan::one_pass).
  int one_pass = 0;
  KK_RETURN_IF_ERROR(tune_value("rows_onepass", 0, 1, &one_pass));
  p->one_pass = one_pass == 1 && p->held > 0 && op_quant_out_dtype(op).has_value();
  // A gated activation + quantization keeps its y (one vector a row vector, x's dtype) in registers between the max
  // and the codes, rather than reading both inputs and forming y again; longer rows (beyond 32K bf16) do that.
  if (op_info(op).family == OpFamily::activation && p->vecs_per_thread <= kRowVecsPerThread)
    p->held = kRowVecsPerThread;
  bool stage = norm && p->held == 0;
  if (op_info(op).family == OpFamily::softmax) {
    int softmax_stage = 0;
    KK_RETURN_IF_ERROR(tune_value("softmax_stage", 0, 1, &softmax_stage));
    stage = softmax_stage == 1 && p->vecs_per_thread <= kRowVecsPerThread;
  }
  const int64_t row_bytes = stage ? s.hidden * elem * op_info(op).row_tensors_read : 0;  // x (and the residual)
  const int64_t budget = std::min(prof.smem_per_block_optin, prof.smem_per_sm);
  auto scratch = [&](int rows) { return row_reduce_scratch_bytes(rows, tpr); };
  while (p->rows_per_block > 1 && scratch(p->rows_per_block) + 2 * p->rows_per_block * row_bytes > budget &&
         tpr * (p->rows_per_block / 2) >= kWarp)
    p->rows_per_block /= 2;
  p->block_threads = tpr * p->rows_per_block;
  p->stage_offset = scratch(p->rows_per_block);
  p->cached = stage && p->stage_offset + 2 * p->rows_per_block * row_bytes <= budget;
  if (p->cached) p->lean = 0;  // softmax_stage=1: the staged kernel
  p->smem_bytes = p->stage_offset + (p->cached ? 2 * p->rows_per_block * row_bytes : 0);
  p->smem_optin = p->smem_bytes > prof.smem_per_block_default;

  // Grid: one block a row group for held rows and wherever the groups fill kRowStreamWaves waves of resident
  // blocks; else at most one wave (a multiple of the SM count), each block looping over row groups (staged rows load
  // their next group while they reduce this one). KERNELKIT_TUNE rows_waves=N: N waves of looping blocks; 0: one
  // block a row group, for every plan.
  p->blocks_per_sm = blocks_per_sm(prof, p->block_threads, p->smem_bytes, kRowNormRegisters);
  if (p->blocks_per_sm == 0)
    return unsupported("row reduction: a block of " + std::to_string(p->block_threads) + " threads does not fit profile " +
                       prof.key);
  const int64_t wave = static_cast<int64_t>(prof.sms) * p->blocks_per_sm;
  p->waves = p->held > 0 || p->lean > 0 || ceil_div(s.rows, p->rows_per_block) >= kRowStreamWaves * wave ? 0 : 1;
  KK_RETURN_IF_ERROR(tune_value("rows_waves", 0, 1024, &p->waves));
  if (p->waves != 0) p->lean = 0;  // the lean kernel has no row loop
  size_grid(prof, s.rows, p);
  return Status::Ok();
}

Status plan_elementwise(const DeviceProfile& prof, const OpShape& s, DType dtype, LaunchPlan* p, int waves,
                        bool one_row_form) {
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
  KK_RETURN_IF_ERROR(tune_value("ew_waves", 0, 1024, &waves));
  p->waves = waves;
  const int64_t wave = static_cast<int64_t>(prof.sms) * p->blocks_per_sm * waves;
  const int64_t grid_y =
      std::max<int64_t>(1, std::min({row_blocks, waves == 0 ? row_blocks : wave / p->grid_x, kMaxGridY}));
  p->sms = prof.sms;
  p->grid = p->grid_x * grid_y;
  int one_row = one_row_form ? kActivationOneRow : 0;
  if (one_row_form) KK_RETURN_IF_ERROR(tune_value("ew_one_row", 0, 1, &one_row));
  // The one-row form: a 1-D grid with a block for every (row group, column block), one vector of one row a thread;
  // not where ew_waves asks for fewer blocks.
  if (one_row == 1 && (waves == 0 || grid_y == row_blocks) && row_blocks <= kMaxGridX / p->grid_x) {
    p->vecs_per_thread = 1;
    p->blocks_per_sm =
        blocks_per_sm(prof, p->block_threads, 0, 65536 / (kElementwiseThreads * kElementwiseOneRowMinBlocks));
    p->grid = p->grid_x * row_blocks;
  }
  const int64_t resident_per_sm = std::min<int64_t>(p->blocks_per_sm, ceil_div(p->grid, prof.sms));
  p->occupancy = static_cast<double>(resident_per_sm * p->block_threads) / prof.max_threads_per_sm;
  return Status::Ok();
}

// `blocks` blocks of `steps` sequential steps each, `wave` of them resident at once: the steps a part gets when each
// block's steps are split into the count of parts (at most max_parts, never more than the steps) that minimises the
// estimated time, waves x (steps a part + `overhead`), the fewest parts on ties. No split when the blocks alone fill a
// wave, unless past_one_wave. The model counts whole waves: 256 blocks with 396 a wave (b32 h_kv 8 decode of
// two-stage blocks, three an SM, on the H200) take 3 splits (768 blocks, two full waves) rather than the 2 of a
// one-wave target (512 blocks, a second wave 30% full). Past one wave it would give 512 such blocks (b64, 1.3 waves) 3
// splits of 2048 keys' 32 tiles: 4 waves x 13 against 2 x 34.
int64_t split_steps(int64_t blocks, int64_t wave, int64_t steps, int64_t max_parts, int64_t overhead,
                    bool past_one_wave) {
  steps = std::max<int64_t>(steps, 1);
  blocks = std::max<int64_t>(blocks, 1);
  if (blocks >= wave && !past_one_wave) return steps;
  int64_t best = -1, chunk = steps;
  for (int64_t s = 1; s <= std::min(steps, max_parts); ++s) {
    const int64_t c = ceil_div(steps, s), used = ceil_div(steps, c);  // parts that get steps
    const int64_t cost = ceil_div(blocks * used, wave) * (c + overhead);
    if (best < 0 || cost < best) best = cost, chunk = c;
  }
  return chunk;
}

}  // namespace plan

void refine_plan_occupancy(const DeviceProfile& prof, int resident_blocks, int64_t rows, LaunchPlan* p) {
  const int limit = blocks_per_sm(prof, p->block_threads, p->smem_bytes, 0);
  p->blocks_per_sm = std::max(1, std::min(resident_blocks, limit));
  plan::size_grid(prof, rows, p);
}

int blocks_per_sm(const DeviceProfile& prof, int threads, int64_t smem, int regs) {
  if (threads <= 0 || threads > kRowNormMaxThreads || threads > prof.max_threads_per_sm) return 0;
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
    return unsupported(std::string(info.name) + ": " + std::string(dtype_name(dtype)) + " " + prof.dtype_refusal(dtype));
  if (s.hidden <= 0)
    return invalid_argument(std::string(info.name) + ": hidden size must be > 0, got " + std::to_string(s.hidden));
  if (s.rows < 0)
    return invalid_argument(std::string(info.name) + ": rows must be >= 0, got " + std::to_string(s.rows));
  switch (info.family) {
    case OpFamily::norm:
    case OpFamily::softmax: return plan::plan_rows(prof, op, s, dtype, p);
    case OpFamily::activation:  // a gated activation + quantization reduces its rows (max |y|)
      if (op_quant_out_dtype(op)) return plan::plan_rows(prof, op, s, dtype, p);
      return plan::plan_elementwise(prof, s, dtype, p, kActivationWaves, true);
    case OpFamily::rope: return plan::plan_elementwise(prof, s, dtype, p);  // rope: hidden = the vectorized width
    case OpFamily::quant: return detail::plan_quant(prof, op, s, dtype, p);
    case OpFamily::attention:  // tiles from plan_tile, decode splits from plan_decode
    case OpFamily::gemm: break;  // cuBLASLt chooses
  }
  return unsupported(std::string(info.name) + ": no planner for this op family");
}

std::string LaunchPlan::to_string() const {
  std::ostringstream os;
  if (library) {
    os << op_info(op).name << " " << dtype_name(dtype) << " on " << profile
       << ": cuBLASLt (its heuristic chooses the kernel per shape)";
    return os.str();
  }
  if (k_warps > 0) {
    const bool mma = tokens % kLinearMmaGemvTokens == 0;  // the tensor-core GEMV: stages = regions a warp's batch
    os << op_info(op).name << " " << dtype_name(dtype) << " on " << profile << ": block 32x" << rows_per_block << " ("
       << block_threads << " threads, split-K " << k_warps << "), grid " << grid << ", "
       << (stages > 0 && !mma ? "cp.async ring of " + std::to_string(stages) + ", " : std::string()) << out_rows
       << " rows x " << tokens << " tokens a block, "
       << (mma ? "mma.sync m16n8k16 over " + std::to_string(vec) + "-weight regions, batches of " +
                     std::to_string(stages)
               : std::to_string(vec) + " weights a 16-byte load")
       << ", smem " << smem_bytes << " B, " << blocks_per_sm << " blocks/SM, occupancy "
       << static_cast<int>(occupancy * 100 + 0.5) << "%" << (programmatic ? ", programmatic launch" : "");
    return os.str();
  }
  os << op_info(op).name << " " << dtype_name(dtype) << " on " << profile << ": block " << threads_per_row << "x"
     << rows_per_block << " (" << block_threads << " threads), grid " << grid;
  if (grid_x != grid) os << " (" << grid_x << "x" << grid / grid_x << ")";
  if (waves == 0) os << " (a block a row group)";
  if (k_splits > 1) os << ", k split " << k_splits << " ways (" << k_tiles_per_split << " tiles each)";
  os << ", vec " << vec << ", ";
  if (vecs_per_thread > 0) os << vecs_per_thread << " vec/thread, ";
  if (out_rows > 0) os << "tiles of " << tokens << " tokens x " << out_rows << " outputs, ";
  if (op_info(op).family == OpFamily::activation && op_quant_out_dtype(op))
    os << (held > 0 ? "y held in registers" : "inputs re-read for the codes") << ", ";
  if (op_info(op).family == OpFamily::softmax && lean > 0) os << "rows held in registers (lean kernel), ";
  if (op_info(op).family == OpFamily::norm)
    os << (lean > 0   ? "rows held in registers (lean kernel)"
           : held > 0 ? "rows held in registers"
           : cached   ? "rows staged in smem"
                      : "rows re-read (too long to stage)")
       << ", ";
  os << "smem " << smem_bytes
     << " B" << (smem_optin ? " (opt-in)" : "") << ", " << blocks_per_sm << " blocks/SM, occupancy "
     << static_cast<int>(occupancy * 100 + 0.5) << "%";
  return os.str();
}

}  // namespace kernelkit
