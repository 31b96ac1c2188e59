// Persistence primitives for kernel and host code on both backends.
//
//   gpm::persist()          order everything this thread stored before it and make it durable
//                           in the pool's persistence domain (GPU: __threadfence_system(),
//                           which returns once the stores have reached host memory)
//   gpm::persist(p, len)    the same, naming the range; on the host, for pools on device-DAX
//                           (power-fail durable), it also writes the range's cache lines back
//   gpm::persist_at(site, p, len)  persist(p, len) at a named persist site of a protocol, so
//                           that the crash-image checker (crash_image.hpp) can disable it
//   gpm::persist_at(site)   persist() at a named persist site (a fence naming no range). Prefer
//                           the ranged form where the protocol knows what it makes durable: the
//                           checker models a fence naming no range as making every line durable
//   gpm::persist_each_at(site, n, bytes, at)  a thread's n scattered ranges at one site: one
//                           fence on a GPU, each range named elsewhere
//   gpm::persist_later_at(site, p, len), then gpm::persist_named_at(site)  the same for ranges
//                           named one by one as they are stored, with one fence after the last
//   gpm::write_back(p, len) host only: writes the range's cache lines back to memory (clwb,
//                           else clflushopt, else clflush), then fences, whatever the mapping;
//                           what a CPU persisting GPU-written data does on PM platforms (the
//                           paper baselines GPM-NDP and CAP-mm)
//
// What "durable" means is the pool's durability level (gpm::pool::durability()): host memory
// survives a crash of the process; device-DAX with a persistent cache domain survives power
// loss; snapshots give power-loss durability at the points the program chooses.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include <gpm/config.hpp>
#include <gpm/platform/macros.hpp>
#if GPM_BACKEND_HOST
#include <gpm/platform/detail/emu/thread_context.hpp>
#endif

namespace gpm {

namespace detail {
// Writes back the cache lines of [p, p + len) if they belong to a power-fail-durable mapping,
// then fences. Host code only.
void host_persist_range(const void* p, std::size_t len);
// Mappings whose host stores must be written back from the CPU caches to be durable.
void register_power_fail_range(const void* p, std::size_t len);
void unregister_power_fail_range(const void* p);

// The crash-image checker's durability model while one is armed (crash_image.hpp), else null:
// what the checker costs host code when none is armed is one relaxed load of this pointer.
struct durability_model;
extern std::atomic<durability_model*> armed_durability_model;
// A fence: every line of the checked range that differs from its durable copy becomes durable.
void model_persist_all(durability_model& m);
// The lines covering [p, p + len) inside the checked range become durable.
void model_persist_range(durability_model& m, const void* p, std::size_t len);
// Counts a hit of persist site `site`; true if the checker disables it.
bool model_site_disabled(durability_model& m, const char* site);
}  // namespace detail

// Host code only (see above).
void write_back(const void* p, std::size_t len);

GPM_HOST_DEVICE inline void persist() {
#if GPM_IN_GPU_CODE
  __threadfence_system();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (detail::durability_model* m =
          detail::armed_durability_model.load(std::memory_order_relaxed)) {
    detail::model_persist_all(*m);
  }
#if GPM_BACKEND_HOST
  emu::detail::atomic_point();  // a kernel on the emulator may be overtaken here, as on a GPU
#endif
#endif
}

GPM_HOST_DEVICE inline void persist(const void* p, std::size_t len) {
#if GPM_IN_GPU_CODE
  (void)p;
  (void)len;
  __threadfence_system();
#else
  detail::host_persist_range(p, len);
#if GPM_BACKEND_HOST
  emu::detail::atomic_point();
#endif
#endif
}

namespace detail {
// Whether an armed crash-image checker disables persist site `site` (counting the hit); on a GPU
// never.
GPM_HOST_DEVICE inline bool site_disabled(const char* site) {
#if GPM_IN_GPU_CODE
  (void)site;
  return false;
#else
  durability_model* m = armed_durability_model.load(std::memory_order_relaxed);
  return m != nullptr && model_site_disabled(*m, site);
#endif
}
}  // namespace detail

// persist(p, len) at the persist site `site` ("module.operation.what"); with the crash-image
// checker armed and told to disable this site, it does nothing, as if the call were deleted.
GPM_HOST_DEVICE inline void persist_at(const char* site, const void* p, std::size_t len) {
  if (!detail::site_disabled(site)) persist(p, len);
}

// persist() at the persist site `site`; disabled like the ranged form.
GPM_HOST_DEVICE inline void persist_at(const char* site) {
  if (!detail::site_disabled(site)) persist();
}

// The persist site `site` for `n` ranges of `bytes` bytes each that the calling thread stored
// (at(i) gives the i-th): in GPU code one fence, which makes every store of the thread durable;
// elsewhere (host code, kernels on the emulator) each range is named, so that the crash-image
// checker makes exactly those lines durable (one range spanning scattered ranges would carry
// other threads' stores between them along, and a fence naming none would carry every line).
template <class At>
GPM_HOST_DEVICE inline void persist_each_at(const char* site, std::uint64_t n, std::size_t bytes,
                                            At at) {
#if GPM_IN_GPU_CODE
  (void)n;
  (void)bytes;
  (void)at;
  persist_at(site);
#else
  for (std::uint64_t i = 0; i < n; ++i) persist_at(site, at(i), bytes);
#endif
}

// For a thread that makes a run of ranges durable at one site and can fence once after the
// last: persist_later_at names each range as it is stored, persist_named_at fences once after
// the run. In GPU code the first does nothing and the second is one fence, which makes every
// store of the thread durable; elsewhere (host code, kernels on the emulator) the first persists
// its range (so the crash-image checker makes exactly those lines durable) and the second does
// nothing. Both are disabled together when the checker disables the site.
GPM_HOST_DEVICE inline void persist_later_at(const char* site, const void* p, std::size_t len) {
#if GPM_IN_GPU_CODE
  (void)site;
  (void)p;
  (void)len;
#else
  persist_at(site, p, len);
#endif
}
GPM_HOST_DEVICE inline void persist_named_at(const char* site) {
#if GPM_IN_GPU_CODE
  persist_at(site);
#else
  (void)site;
#endif
}

}  // namespace gpm
