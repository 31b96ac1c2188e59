// gpmbench workloads comparing persistent GPU hash indexes on YCSB (GPHash, FAST'25 §4): the
// indexes of the paper side by side in one run, each a mode, all driven by one runner
// (ycsb_runner.cuh) through one adapter interface, all verified after timing.
//
//   ycsb, ycsb_key32, ycsb_kv32,     YCSB A, B, C, D, F, LOAD x index (8- or 32-byte keys, 128-
//   ycsb_uniform                     or 32-byte values; Zipf 0.99 or uniform)
//   hash_micro                       positive/negative search, insert, update, delete x index
//   hash_batch_sweep(_key32, _kv32)  YCSB A x index, C and LOAD x GPHash at batch sizes
//                                    2^10..2^22 (8- or 32-byte keys, 128- or 32-byte values):
//                                    throughput-latency
//   hash_factors                     GPHash's techniques added one at a time (FAST'25 Figure 9)
//   hash_cache                       GPHash BktCache size and policy, YCSB C and A
//   hash_load_factor                 inserts until the first finds no room, per index
//   hash_resize_recovery             GPHash resize and recovery, SlabHash-GPM recovery
//
// Every workload starts with the mode `bound`: the platform's random persisted 8-byte store rate
// (and CAS rate, as a metric), measured in the same run; index modes record their ratio to it.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>

#include "gpmbench/resources.hpp"
#include "gpmbench/stats.hpp"
#include "gpmbench/timing.hpp"
#include "gpmbench/workload.hpp"
#include "workloads/platform/random_access.hpp"
#include "workloads/ycsb/clevel_index.cuh"
#include "workloads/ycsb/cpu_hash.hpp"
#include "workloads/ycsb/gphash_index.cuh"
#include "workloads/ycsb/slab_index.cuh"
#include "workloads/ycsb/ycsb_runner.cuh"

namespace gpmbench {

namespace ycsb {
namespace {

// ---- the indexes --------------------------------------------------------------------------

enum class index_kind { gphash, clevel_gpm, slab_gpm, cpu_assisted };

// An index of a mode: which one and, for GPHash, which variant.
struct index_choice {
  index_kind kind;
  std::string name;
  std::string summary;
  gphash_variant variant{};
};

const index_choice kGphash{
    index_kind::gphash, "gphash",
    "GPHash: warp-cooperative, lock-free, log-free, with BktCache (20% LFU), the fingerprint "
    "mirror and combined updates"};
// Beside gphash in one run: GPHash without the fingerprint mirror (docs/gphash.md, "The
// fingerprint mirror"), so that the mirror's effect is measured side by side.
const index_choice kGphashNoMirror{
    index_kind::gphash,
    "gphash-nomirror",
    "GPHash with BktCache (20% LFU) and combined updates, without the fingerprint mirror",
    {.fingerprint_mirror = false}};
// Beside gphash in one run: GPHash without combined updates (docs/gphash.md, "Combined
// updates"), so that their effect is measured side by side.
const index_choice kGphashNoCombine{
    index_kind::gphash,
    "gphash-nocombine",
    "GPHash with BktCache (20% LFU) and the fingerprint mirror, without combined updates",
    {.combine_updates = false}};
const index_choice kGphashGpuMemory{
    index_kind::gphash,
    "gpu-memory",
    "the ceiling: GPHash with the index in GPU memory and no persistence",
    {.cache = false, .gpu_memory = true, .fingerprint_mirror = false}};
const index_choice kClevelGpm{
    index_kind::clevel_gpm, "clevel-gpm",
    "Clevel-GPM: per-thread lock-free CAS slots in the pool (naive GPM port)"};
const index_choice kSlabGpm{
    index_kind::slab_gpm, "slab-gpm",
    "SlabHash-GPM: warp-cooperative linked slabs in the pool, undo-logged updates"};
const index_choice kCpuAssisted{
    index_kind::cpu_assisted, "cpu-assisted",
    "CPU-assisted: batches shipped to CPU threads running Clevel on the pool"};
// The last step of the factor analysis: +fpmirror and combined updates, gpmkit's defaults.
const index_choice kGphashFactorsDefault{
    index_kind::gphash, "+combine", "+fpmirror + combined updates", {.combine_updates = true}};
const index_choice kIndexes[] = {kGphash,    kGphashNoMirror, kGphashNoCombine, kGphashGpuMemory,
                                 kClevelGpm, kSlabGpm,        kCpuAssisted};

// GPHash with the paper's techniques switched on or off (factor analysis, cache sweep), without
// gpmkit's own (the fingerprint mirror, combined updates).
index_choice gphash_variant_of(const std::string& name, const std::string& summary,
                               unsigned cg_size, bool in_place_keys, bool cache,
                               double fraction = 0.2,
                               gpm::cache_policy policy = gpm::cache_policy::lfu) {
  index_choice c{index_kind::gphash, name, summary};
  c.variant.fingerprint_mirror = false;
  c.variant.combine_updates = false;
  c.variant.cg_size = cg_size;
  c.variant.in_place_keys = in_place_keys;
  c.variant.cache = cache;
  c.variant.cache_options.fraction = fraction;
  c.variant.cache_options.policy = policy;
  return c;
}

// A paper-step variant with the fingerprint mirror on.
index_choice with_mirror(index_choice c) {
  c.variant.fingerprint_mirror = true;
  return c;
}

template <class Key, class Value, bool InPlace>
measurement run_gphash(const mode_context& ctx, const std::string& mode_name,
                       const gphash_variant& variant, const ycsb_plan& plan, std::uint64_t keys) {
  using index = gphash_index<Key, Value, InPlace>;
  const geometry g = filling_geometry(ctx);
  return measure<index>(ctx, mode_name, plan, index::pool_bytes(keys),
                        [&](gpm::pool& p) { return std::make_unique<index>(p, keys, g, variant); });
}

// The adapter table: how each index is sized and built; the runner does everything else.
template <class Key, class Value>
measurement run_index(const mode_context& ctx, const std::string& mode_name,
                      const index_choice& which, const ycsb_plan& plan) {
  const std::uint64_t keys = plan.stream.max_keys(plan.ops);
  const std::uint64_t records = keys + plan.stream.writes(plan.ops);
  const geometry g = filling_geometry(ctx);
  switch (which.kind) {
    case index_kind::gphash:
      return which.variant.in_place_keys
                 ? run_gphash<Key, Value, true>(ctx, mode_name, which.variant, plan, keys)
                 : run_gphash<Key, Value, false>(ctx, mode_name, which.variant, plan, keys);
    case index_kind::clevel_gpm: {
      using index = clevel_index<Key, Value>;
      return measure<index>(
          ctx, mode_name, plan, index::pool_bytes(keys, records), [&](gpm::pool& p) {
            return std::make_unique<index>(index::create(p, "clevel", keys, records, g));
          });
    }
    case index_kind::slab_gpm: {
      using index = slab_index<Key, Value>;
      return measure<index>(
          ctx, mode_name, plan,
          index::pool_bytes(keys, records, std::uint64_t{g.blocks} * g.threads / 32),
          [&](gpm::pool& p) {
            return std::make_unique<index>(index::create(p, "slab", keys, records, g));
          });
    }
    case index_kind::cpu_assisted: {
      using index = cpu_hash_index<Key, Value>;
      return measure<index>(
          ctx, mode_name, plan, index::pool_bytes(keys, records),
          [&](gpm::pool& p) { return index::create(p, "cpu", keys, records, plan.batch); });
    }
  }
  check_failed("unknown index");
}

// ---- the bound: random persisted 8-byte stores, CAS and line reads at an index's span --------

measurement bound(const mode_context& ctx) {
  // On a GPU as large as an index's value area (gigabytes): random reads over a few hundred MiB
  // run several times faster than over the whole index.
  const std::uint64_t span = ctx.options.quick     ? 4 * kMiB
                             : ctx.device.emulated ? 256 * kMiB
                                                   : 4096 * kMiB;
  const std::uint64_t n = ctx.options.quick     ? 64ull << 10
                          : ctx.device.emulated ? 1ull << 20
                                                : 32ull << 20;
  const bench_pool p(ctx, "bound", pool_bytes_for(span), span);
  measurement m = random_persists(ctx, p, n, "bound");
  // The CAS at gpm::pool_scope, as the indexes claim slots; the reads bound searches (a probe
  // reads its candidate buckets and the value).
  const auto rate = [](const measurement& r) {
    return r.throughput.value(summarize(r.times_s).median_s);
  };
  m.metrics = {{"cas_mops", rate(random_cas(ctx, p, n, cas_scope::pool, "bound"))},
               {"read_mlines", rate(random_line_reads(ctx, p, n / 4, "bound"))}};
  m.sizes.push_back({"lines_read", n / 4});
  return m;
}

// ---- workloads ------------------------------------------------------------------------------

struct plan_choice {
  workload_kind kind;
  double theta;
  bool macro;               // macro (YCSB) or micro operation count
  std::uint64_t batch = 0;  // 0: the named default
};

template <class Key, class Value>
ycsb_plan plan_for(const mode_context& ctx, const plan_choice& c) {
  const ycsb_sizes sz = sizes_for(ctx, sizeof(kv_record<Key, Value>));
  std::uint64_t ops = c.macro ? sz.macro_ops : sz.micro_ops;
  if (c.kind == workload_kind::erase) ops = std::min(ops, sz.loaded);
  const std::uint64_t batch = std::min(c.batch != 0 ? c.batch : sz.batch_size, ops);
  return {make_stream(c.kind, sz.loaded, ops, batch, c.theta, kSeed), ops, batch, sizeof(Key)};
}

// `Value`: the value type of every index of the mode (kv_value: 128 bytes).
template <class Key, class Value = kv_value>
mode index_mode(const std::string& prefix, const index_choice& which, plan_choice c) {
  const std::string name = prefix + ":" + which.name;
  return {name, which.summary + ", " + prefix, "bound", [=](const mode_context& ctx) {
            return run_index<Key, Value>(ctx, name, which, plan_for<Key, Value>(ctx, c));
          }};
}

mode bound_mode() {
  return {"bound",
          "the platform's random persisted 8-byte store rate (M/s; cas_mops: CAS rate; "
          "read_mlines: random 128-byte line reads, M/s)",
          "", bound};
}

constexpr workload_kind kYcsbKinds[] = {workload_kind::a, workload_kind::b, workload_kind::c,
                                        workload_kind::d, workload_kind::f, workload_kind::load};
constexpr workload_kind kMicroKinds[] = {workload_kind::pos_search, workload_kind::neg_search,
                                         workload_kind::insert, workload_kind::update,
                                         workload_kind::erase};

// A mode per (workload kind, index), in that order.
template <class Key, class Value = kv_value, class Kinds, class Indexes>
void add_index_modes(workload* w, const Kinds& kinds, const Indexes& indexes, double theta,
                     bool macro) {
  for (workload_kind k : kinds) {
    for (const index_choice& i : indexes) {
      w->modes.push_back(index_mode<Key, Value>(to_string(k), i, {k, theta, macro}));
    }
  }
}

template <class Key, class Value = kv_value>
workload ycsb_workload(const std::string& name, const std::string& summary, double theta) {
  workload w{name, summary, {bound_mode()}};
  add_index_modes<Key, Value>(&w, kYcsbKinds, kIndexes, theta, true);
  return w;
}

// ---- load factor, resize and recovery ------------------------------------------------------

// Inserts fresh keys in batches of 2^14 (the paper samples the load factor every 2^14
// insertions) until a batch has one that finds no room (GPHash without auto-resize); the load
// factor counts every key that batch stored.
template <class Index>
measurement load_factor_of(const mode_context& ctx, const std::string& name,
                           std::uint64_t index_bytes,
                           const std::function<std::unique_ptr<Index>(gpm::pool&)>& make,
                           std::uint64_t keys) {
  bench_pool bp(ctx, name, pool_bytes_for(index_bytes), bench_pool::kNoObject, 32);
  std::unique_ptr<Index> index = make(bp.pool());
  const gpm::stream s;
  const std::uint64_t batch = std::uint64_t{1} << 14;
  std::uint64_t stored = 0;
  measurement m;
  m.times_s = ctx.repeat([&](int) {
    index->clear();
    return seconds_on_host([&] { stored = fill_until_full(*index, batch, 4 * keys, s.get()); });
  });
  const double lf = static_cast<double>(stored) / static_cast<double>(index->slot_capacity());
  if (stored == 0 || lf > 1) check_failed(name + ": impossible load factor");
  m.sizes = {
      {"keys_stored", stored}, {"slot_capacity", index->slot_capacity()}, {"batch_size", batch}};
  m.throughput = mega_operations(stored);
  m.metrics = {{"load_factor", lf}};
  return m;
}

// `displace`: GPHash moves items for inserts that find no room (gphash_index::make_room).
measurement load_factor_mode(const mode_context& ctx, index_kind kind, bool displace = true) {
  const std::uint64_t keys = sizes_for(ctx, sizeof(kv_record<key8>)).loaded;
  const geometry g = filling_geometry(ctx);
  switch (kind) {
    case index_kind::gphash: {
      gphash_variant v;
      v.cache = false;
      v.displace = displace;
      return load_factor_of<gphash_index<key8>>(
          ctx, "gphash", gphash_index<key8>::pool_bytes(keys),
          [&](gpm::pool& p) { return std::make_unique<gphash_index<key8>>(p, keys, g, v); }, keys);
    }
    case index_kind::clevel_gpm:
      return load_factor_of<clevel_index<key8>>(
          ctx, "clevel-gpm", clevel_index<key8>::pool_bytes(keys, 4 * keys),
          [&](gpm::pool& p) {
            return std::make_unique<clevel_index<key8>>(
                clevel_index<key8>::create(p, "clevel", keys, 4 * keys, g));
          },
          keys);
    case index_kind::slab_gpm: {
      // Records for every slot, so that the slabs, not the record heap, run out first.
      const std::uint64_t records = slab_index<key8>::slabs_for(keys) * kSlabSlots;
      return load_factor_of<slab_index<key8>>(
          ctx, "slab-gpm",
          slab_index<key8>::pool_bytes(keys, records, std::uint64_t{g.blocks} * g.threads / 32),
          [&](gpm::pool& p) {
            return std::make_unique<slab_index<key8>>(
                slab_index<key8>::create(p, "slab", keys, records, g));
          },
          records);
    }
    case index_kind::cpu_assisted: break;
  }
  check_failed("load_factor_mode: no such index");
}

// GPHash resize (adding a level to a loaded table) and recovery (reopening it), timed.
template <bool Resize>
measurement gphash_maintenance(const mode_context& ctx) {
  const std::uint64_t keys = sizes_for(ctx, sizeof(kv_record<key8>)).loaded;
  const geometry g = filling_geometry(ctx);
  gphash_variant v;
  v.cache = false;
  const char* name = Resize ? "gphash-resize" : "gphash-recover";
  bench_pool bp(ctx, name, pool_bytes_for(2 * gphash_index<key8>::pool_bytes(keys)),
                bench_pool::kNoObject, 32);
  gphash_index<key8> index(bp.pool(), keys, g, v);
  const gpm::stream s;
  const std::string what(name);
  measurement m;
  m.times_s = ctx.repeat([&](int) {
    index.clear();
    run_expecting_ok(index, load_stream{}, keys, what + ": load", s.get());
    return seconds_on_host([&] {
      if constexpr (Resize) {
        index.table().resize();
      } else {
        index.table().recover();
      }
    });
  });
  run_expecting_ok(index, find_stream{}, keys, what + ": every key after it", s.get());
  m.sizes = {{"keys", keys}, {"slot_capacity", index.slot_capacity()}};
  m.throughput = mega_operations(keys);
  m.metrics = {{Resize ? "resize_s" : "recovery_s", m.times_s.empty() ? 0 : m.times_s.back()}};
  return m;
}

// SlabHash-GPM recovery (undo log scan and lock reset) of a loaded index, for comparison.
measurement slab_recovery(const mode_context& ctx) {
  const std::uint64_t keys = sizes_for(ctx, sizeof(kv_record<key8>)).loaded;
  const geometry g = filling_geometry(ctx);
  const std::uint64_t log_entries = std::uint64_t{g.blocks} * g.threads / 32;
  bench_pool bp(ctx, "slab-recover",
                pool_bytes_for(slab_index<key8>::pool_bytes(keys, keys, log_entries)),
                bench_pool::kNoObject, 32);
  slab_index<key8> index = slab_index<key8>::create(bp.pool(), "slab", keys, keys, g);
  const gpm::stream s;
  run_expecting_ok(index, load_stream{}, keys, "slab-gpm-recover: load", s.get());
  measurement m;
  m.times_s = ctx.repeat([&](int) { return seconds_on_host([&] { index.recover(); }); });
  run_expecting_ok(index, find_stream{}, keys, "slab-gpm-recover: every key after it", s.get());
  m.sizes = {{"keys", keys}, {"undo_log_entries", log_entries}};
  m.throughput = mega_operations(keys);
  m.metrics = {{"recovery_s", m.times_s.back()}};
  return m;
}

}  // namespace
}  // namespace ycsb

workload ycsb_workload() {
  return ycsb::ycsb_workload<ycsb::key8>(
      "ycsb", "YCSB A/B/C/D/F/LOAD on each persistent hash index: 8-byte keys, Zipf 0.99",
      ycsb::kDefaultTheta);
}

workload ycsb_key32_workload() {
  return ycsb::ycsb_workload<ycsb::key32>(
      "ycsb_key32", "YCSB A/B/C/D/F/LOAD on each persistent hash index: 32-byte keys, Zipf 0.99",
      ycsb::kDefaultTheta);
}

// The GPHash artifact's key-value size: 32-byte keys and 32-byte values.
workload ycsb_kv32_workload() {
  return ycsb::ycsb_workload<ycsb::key32, ycsb::value32>(
      "ycsb_kv32",
      "YCSB A/B/C/D/F/LOAD on each persistent hash index: 32-byte keys, 32-byte values, Zipf 0.99",
      ycsb::kDefaultTheta);
}

workload ycsb_uniform_workload() {
  return ycsb::ycsb_workload<ycsb::key8>(
      "ycsb_uniform", "YCSB A/B/C/D/F/LOAD on each persistent hash index: 8-byte keys, uniform",
      0.0);
}

workload hash_micro_workload() {
  using namespace ycsb;
  workload w{"hash_micro",
             "index micro-benchmarks: positive/negative search, insert, update, delete",
             {bound_mode()}};
  add_index_modes<key8>(&w, kMicroKinds, kIndexes, kDefaultTheta, false);
  return w;
}

// Batch sizes 2^10, 2^12, ... 2^22: YCSB A on every index, C and LOAD on GPHash (with and without
// the fingerprint mirror) and its GPU-memory ceiling (`Key`: 8- or 32-byte keys; `Value`: 128- or
// 32-byte values).
template <class Key, class Value = ycsb::kv_value>
workload batch_sweep_workload(const std::string& name, const std::string& summary) {
  using namespace ycsb;
  workload w{name, summary, {bound_mode()}};
  const auto sweep = [&](workload_kind k, const index_choice& i) {
    for (unsigned log2 = 10; log2 <= 22; log2 += 2) {
      w.modes.push_back(index_mode<Key, Value>(
          std::string(to_string(k)) + "-batch" + std::to_string(1ull << log2), i,
          {k, kDefaultTheta, false, 1ull << log2}));
    }
  };
  for (const index_choice& i : kIndexes) sweep(workload_kind::a, i);
  for (workload_kind k : {workload_kind::c, workload_kind::load}) {
    for (const index_choice& i : {kGphash, kGphashNoMirror, kGphashGpuMemory}) sweep(k, i);
  }
  return w;
}

workload hash_batch_sweep_workload() {
  return batch_sweep_workload<ycsb::key8>(
      "hash_batch_sweep",
      "YCSB A (every index), C and LOAD (GPHash) at batch sizes 2^10..2^22: throughput and batch "
      "latency, 8-byte keys");
}

workload hash_batch_sweep_key32_workload() {
  return batch_sweep_workload<ycsb::key32>(
      "hash_batch_sweep_key32",
      "YCSB A (every index), C and LOAD (GPHash) at batch sizes 2^10..2^22: throughput and batch "
      "latency, 32-byte keys");
}

workload hash_batch_sweep_kv32_workload() {
  return batch_sweep_workload<ycsb::key32, ycsb::value32>(
      "hash_batch_sweep_kv32",
      "YCSB A (every index), C and LOAD (GPHash) at batch sizes 2^10..2^22: throughput and batch "
      "latency, 32-byte keys, 32-byte values");
}

workload hash_factors_workload() {
  using namespace ycsb;
  // FAST'25 Figure 9: from a baseline without the techniques, add one at a time.
  const index_choice variants[] = {
      gphash_variant_of("baseline", "GPHash baseline: per-thread, keys out of place, no BktCache",
                        1, false, false),
      gphash_variant_of("+warp", "baseline + warp-cooperative one-shot access", 32, false, false),
      gphash_variant_of("+in-place", "+warp + keys in place", 32, true, false),
      gphash_variant_of("+bktcache", "+in-place + BktCache (20% LFU): the paper's GPHash", 32, true,
                        true),
      with_mirror(
          gphash_variant_of("+fpmirror", "+bktcache + the fingerprint mirror", 32, true, true)),
      kGphashFactorsDefault};
  workload w{"hash_factors",
             "GPHash factor analysis: warp cooperation, in-place keys, BktCache, the fingerprint "
             "mirror and combined updates added one at a time, YCSB A/B/C/D/F/LOAD",
             {bound_mode()}};
  add_index_modes<key8>(&w, kYcsbKinds, variants, kDefaultTheta, true);
  return w;
}

workload hash_cache_workload() {
  using namespace ycsb;
  workload w{"hash_cache",
             "GPHash BktCache: size (10/20/40%) and policy (LFU/LRU/random), YCSB A and C",
             {bound_mode()}};
  const std::pair<const char*, gpm::cache_policy> policies[] = {
      {"lfu", gpm::cache_policy::lfu},
      {"lru", gpm::cache_policy::lru},
      {"random", gpm::cache_policy::random}};
  for (workload_kind k : {workload_kind::c, workload_kind::a}) {
    const plan_choice plan{k, kDefaultTheta, true};
    w.modes.push_back(index_mode<key8>(
        to_string(k), gphash_variant_of("no-cache", "GPHash, no bucket cache", 32, true, false),
        plan));
    for (const auto& [policy_name, policy] : policies) {
      for (int percent : {10, 20, 40}) {
        w.modes.push_back(index_mode<key8>(
            to_string(k),
            gphash_variant_of(std::string(policy_name) + "-" + std::to_string(percent),
                              "GPHash with BktCache", 32, true, true, percent / 100.0, policy),
            plan));
      }
    }
  }
  return w;
}

workload hash_load_factor_workload() {
  using namespace ycsb;
  workload w{"hash_load_factor",
             "inserts until the first finds no room: the load factor each index reaches",
             {}};
  for (const index_choice& i : {kGphash, kClevelGpm, kSlabGpm}) {
    const index_kind kind = i.kind;
    w.modes.push_back({i.name, i.summary + ": load factor at the first full insert", "",
                       [kind](const mode_context& ctx) { return load_factor_mode(ctx, kind); }});
  }
  w.modes.push_back({"gphash-no-moves",
                     "GPHash without displacement (the paper's placement alone): load factor at "
                     "the first full insert",
                     "", [](const mode_context& ctx) {
                       return load_factor_mode(ctx, index_kind::gphash, false);
                     }});
  return w;
}

workload hash_resize_recovery_workload() {
  using namespace ycsb;
  return {"hash_resize_recovery",
          "GPHash resize and recovery times of a loaded table; SlabHash-GPM recovery",
          {{"gphash-resize", "GPHash: add a level to a loaded table (keys/s moved)", "",
            gphash_maintenance<true>},
           {"gphash-recover", "GPHash: recover() of a loaded table", "", gphash_maintenance<false>},
           {"slab-gpm-recover", "SlabHash-GPM: recover() (undo-log scan, lock reset)", "",
            slab_recovery}}};
}

}  // namespace gpmbench
