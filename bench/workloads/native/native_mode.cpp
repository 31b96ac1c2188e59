// The measuring skeleton shared by the native-persistence workloads (see native_mode.hpp).
#include "native_mode.hpp"

#include "gpmbench/resources.hpp"
#include "gpmbench/timing.hpp"

namespace gpmbench::native {

namespace {

measurement measure(const mode_context& ctx, way w, const problem_factory& make) {
  const native_problem p = make(ctx, w);
  bench_pool pool(ctx, p.workload + "-" + mode_name(w), run_store::pool_bytes(p.arrays),
                  bench_pool::kNoObject, 16);
  const run_store store = run_store::create(pool.pool(), p.workload, p.params, p.arrays);
  sink out(w, store, ctx.pm_dir + "/" + p.workload + ".cap-fs");
  run_summary last;
  measurement m;
  m.times_s = ctx.repeat([&](int) {
    store.reset();  // each repeat is a whole run from the start, not a resumed one
    return seconds_on_host([&] { last = p.solve(store, out); });
  });
  p.check(out, mode_name(w));
  m.sizes = p.sizes;
  m.sizes.emplace_back("steps", last.steps_total);
  m.bytes_persisted = last.bytes_persisted;
  m.throughput = gigabytes(last.bytes_persisted);
  m.metrics = {{"steps", static_cast<double>(last.steps_total)},
               {"bytes_persisted_per_step",
                static_cast<double>(last.bytes_persisted) /
                    static_cast<double>(std::max<std::uint64_t>(1, last.steps_total))}};
  return m;
}

}  // namespace

std::vector<mode> native_modes(const problem_factory& make,
                               std::function<std::uint64_t(const mode_context&)> ceiling_bytes) {
  struct described {
    way w;
    const char* summary;
  };
  const described all[] = {
      {way::gpm, "GPM: the kernel persists its results in the pool and publishes each step"},
      {way::gpm_ndp,
       "GPM-NDP: the kernel stores into the pool; CPU threads write it back per step"},
      {way::cap_mm, "CAP-mm: computed in GPU memory, copied into the pool by CPU threads per step"},
      {way::cap_fs, "CAP-fs: computed in GPU memory, written to a file and fsync()ed per step"},
      {way::cpu, "CPU: CPU threads compute into the pool and write back what they store"},
  };
  std::vector<mode> modes = {d2h_ceiling_mode(std::move(ceiling_bytes))};
  for (const described& d : all) {
    modes.push_back({mode_name(d.w), d.summary, "d2h_memcpy",
                     [make, w = d.w](const mode_context& ctx) { return measure(ctx, w, make); }});
  }
  return modes;
}

}  // namespace gpmbench::native
