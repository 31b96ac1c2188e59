// Random work on a pool object at a given span (random_access.hpp), and the gpmbench workload
// `random_span`, which measures it at the spans of the benchmarks' tables.
#include "workloads/platform/random_access.hpp"

#include <cstring>
#include <string>

#include <gpm/platform/atomic.cuh>
#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/platform/persist.hpp>

#include "timing.hpp"

namespace gpmbench {

namespace {

using gpm::mix64;

// A per-call seed: nonzero, and different in every call.
std::uint64_t call_seed(int call) { return mix64(static_cast<std::uint64_t>(call) + 1) | 1; }

// Stores `seed` into random elements of T (8 or 16 bytes): each persisted (EachPersisted), or
// posted, with one persist per thread after its last (as undo recovery restores a stream).
template <class T, bool EachPersisted>
__global__ void random_stores(T* elements, std::uint64_t mask, std::uint64_t stores,
                              std::uint64_t seed) {
  for (std::uint64_t i : gpm::grid_stride(stores)) {
    T& e = elements[mix64(i ^ seed) & mask];
    if constexpr (sizeof(T) == 16) {
      e = T{seed, seed};
    } else {
      e = seed;
    }
    if constexpr (EachPersisted) gpm::persist();
  }
  if constexpr (!EachPersisted) gpm::persist();
}

// A collision costs a retry with the value the CAS returned.
template <gpm::thread_scope Scope>
__global__ void cas_increments(std::uint64_t* words, std::uint64_t mask, std::uint64_t increments,
                               std::uint64_t seed, std::uint64_t* attempts) {
  std::uint64_t tries = 0;
  for (std::uint64_t i : gpm::grid_stride(increments)) {
    const gpm::atomic_ref<std::uint64_t, Scope> word(words[mix64(i ^ seed) & mask]);
    std::uint64_t expected = 0;
    do {
      ++tries;
    } while (!word.compare_exchange_strong(expected, expected + 1, gpm::memory_order_relaxed));
  }
  gpm::persist();
  gpm::atomic_ref<std::uint64_t, gpm::thread_scope::device>(*attempts).fetch_add(
      tries, gpm::memory_order_relaxed);
}

// The sum keeps the reads alive.
__global__ void random_lines(const std::uint64_t* words, std::uint64_t line_mask, std::uint64_t n,
                             std::uint64_t seed, unsigned long long* sum) {
  std::uint64_t acc = 0;
  for (std::uint64_t i : gpm::grid_stride(n * 8)) {
    auto* p =
        const_cast<std::uint64_t*>(words) + (mix64((i / 8) ^ seed) & line_mask) * 16 + (i % 8) * 2;
    acc += gpm::atomic_ref<std::uint64_t, gpm::pool_scope>(p[0]).load(gpm::memory_order_relaxed) +
           gpm::atomic_ref<std::uint64_t, gpm::pool_scope>(p[1]).load(gpm::memory_order_relaxed);
  }
  atomicAdd(sum, static_cast<unsigned long long>(acc));
}

named_counts shape(std::uint64_t span, const char* count_name, std::uint64_t count,
                   const geometry& g) {
  return {{"object_bytes", span},
          {count_name, count},
          {"blocks", g.blocks},
          {"threads_per_block", g.threads}};
}

// random_stores<T, EachPersisted> over the object, every store of the last call checked.
template <class T, bool EachPersisted>
measurement random_store_rate(const mode_context& ctx, const bench_pool& p, std::uint64_t stores,
                              const char* what) {
  const std::uint64_t span = p.object_bytes();
  const std::uint64_t mask = span / sizeof(T) - 1;
  const geometry g = filling_geometry(ctx);
  const gpm::stream s;
  std::uint64_t seed = 0;
  measurement m;
  m.times_s = ctx.repeat([&](int call) {
    seed = call_seed(call);
    return seconds_on_stream(s, [&] {
      gpm::launch(random_stores<T, EachPersisted>, g.blocks, g.threads, 0, s, p.device<T>(), mask,
                  stores, seed);
    });
  });
  const auto* words = p.host<std::uint64_t>();
  constexpr std::uint64_t per = sizeof(T) / sizeof(std::uint64_t);
  for (std::uint64_t i = 0; i < stores; ++i) {
    const std::uint64_t at = (mix64(i ^ seed) & mask) * per;
    if (words[at] != seed || words[at + per - 1] != seed) {
      check_failed(std::string(what) + ": store " + std::to_string(i) +
                   " of the last call is missing");
    }
  }
  m.sizes = shape(span, "stores", stores, g);
  m.throughput = mega_operations(stores);
  m.bytes_persisted = stores * sizeof(T);
  return m;
}

}  // namespace

measurement random_persists(const mode_context& ctx, const bench_pool& p, std::uint64_t stores,
                            const char* what) {
  return random_store_rate<std::uint64_t, true>(ctx, p, stores, what);
}

measurement random_cas(const mode_context& ctx, const bench_pool& p, std::uint64_t increments,
                       cas_scope scope, const char* what) {
  const std::uint64_t span = p.object_bytes();
  const std::uint64_t mask = span / sizeof(std::uint64_t) - 1;
  std::uint64_t* words = p.host<std::uint64_t>();
  gpm::device_buffer<std::uint64_t> attempts(1);
  const geometry g = filling_geometry(ctx);
  const gpm::stream s;
  measurement m;
  m.times_s = ctx.repeat([&](int call) {
    std::memset(words, 0, span);
    attempts.fill_bytes(0);
    return seconds_on_stream(s, [&] {
      const auto kernel = scope == cas_scope::system ? cas_increments<gpm::thread_scope::system>
                                                     : cas_increments<gpm::pool_scope>;
      gpm::launch(kernel, g.blocks, g.threads, 0, s, p.device<std::uint64_t>(), mask, increments,
                  call_seed(call), attempts.data());
    });
  });
  std::uint64_t total = 0;
  for (std::uint64_t w = 0; w <= mask; ++w) total += words[w];
  if (total != increments) {
    check_failed(std::string(what) + ": the words sum to " + std::to_string(total) + ", not the " +
                 std::to_string(increments) + " increments made");
  }
  std::uint64_t tries = 0;
  attempts.copy_to_host(&tries, 1);
  if (tries < increments) check_failed(std::string(what) + ": fewer CAS attempts than increments");
  m.sizes = shape(span, "increments", increments, g);
  m.sizes.push_back({"cas_attempts", tries});
  m.throughput = mega_operations(increments);
  m.bytes_persisted = increments * sizeof(std::uint64_t);
  return m;
}

measurement random_line_reads(const mode_context& ctx, const bench_pool& p, std::uint64_t lines,
                              const char* what) {
  const std::uint64_t span = p.object_bytes();
  std::memset(p.host<std::uint64_t>(), 1, span);
  gpm::device_buffer<unsigned long long> sum(1);
  const geometry g = filling_geometry(ctx);
  const gpm::stream s;
  measurement m;
  m.times_s = ctx.repeat([&](int call) {
    sum.fill_bytes(0);
    const double t = seconds_on_stream(s, [&] {
      gpm::launch(random_lines, g.blocks, g.threads, 0, s, p.device<std::uint64_t>(),
                  span / 128 - 1, lines, call_seed(call), sum.data());
    });
    unsigned long long got = 0;
    sum.copy_to_host(&got, 1);
    if (got != lines * 16 * 0x0101010101010101ull) {
      check_failed(std::string(what) + ": the line reads do not add up");
    }
    return t;
  });
  m.sizes = shape(span, "lines_read", lines, g);
  m.throughput = mega_operations(lines);
  return m;
}

// ---- the workload -------------------------------------------------------------------------

namespace {

// The case's span: on a GPU the span its name says; on the emulator 1/64 of it, and 4 MiB for
// --quick (smoke tests), as its records' object_bytes say.
std::uint64_t span_of(const mode_context& ctx) {
  std::uint64_t span = 256 * kMiB;
  if (ctx.case_name == "1GiB") span = 1024 * kMiB;
  if (ctx.case_name == "4GiB") span = 4096 * kMiB;
  if (ctx.options.quick) return 4 * kMiB;
  return ctx.device.emulated ? span / 64 : span;
}

struct span_counts {
  std::uint64_t stores, increments, lines;
};

span_counts counts_for(const mode_context& ctx) {
  if (ctx.options.quick) return {64ull << 10, 64ull << 10, 16ull << 10};
  if (ctx.device.emulated) return {1ull << 20, 256ull << 10, 256ull << 10};
  return {32ull << 20, 16ull << 20, 8ull << 20};
}

// A mode of random_span: `measure(ctx, pool, counts, name)` on a pool object of the case's span.
template <class Measure>
mode span_mode(const char* name, const char* summary, Measure measure) {
  return {name, summary, "", [=](const mode_context& ctx) {
            const std::uint64_t span = span_of(ctx);
            const bench_pool p(ctx, name, pool_bytes_for(span), span);
            return measure(ctx, p, counts_for(ctx), name);
          }};
}

}  // namespace

workload random_span_workload() {
  return {"random_span",
          "random persisted 8-byte stores, posted 16-byte stores, system-scope CAS and 128-byte "
          "line reads over pool "
          "objects of 256 MiB, 1 GiB and 4 GiB (1/64 of that on the emulator): the ceilings for "
          "random work at the spans of the benchmarks' tables",
          {
              span_mode("persist_random8",
                        "random 8-byte stores into the object, each persisted (M stores/s)",
                        [](const mode_context& ctx, const bench_pool& p, span_counts c,
                           const char* name) { return random_persists(ctx, p, c.stores, name); }),
              span_mode("store_random16",
                        "random 16-byte stores into the object, posted, one persist per thread "
                        "after its last, as undo recovery restores (M stores/s)",
                        [](const mode_context& ctx, const bench_pool& p, span_counts c,
                           const char* name) {
                          return random_store_rate<ulonglong2, false>(ctx, p, c.stores, name);
                        }),
              span_mode("cas_rate", "system-scope CAS increments of random words (M CAS/s)",
                        [](const mode_context& ctx, const bench_pool& p, span_counts c,
                           const char* name) {
                          return random_cas(ctx, p, c.increments, cas_scope::system, name);
                        }),
              span_mode("read_random_lines", "random 128-byte line reads (M lines/s)",
                        [](const mode_context& ctx, const bench_pool& p, span_counts c,
                           const char* name) { return random_line_reads(ctx, p, c.lines, name); }),
          },
          {"256MiB", "1GiB", "4GiB"}};
}

}  // namespace gpmbench
