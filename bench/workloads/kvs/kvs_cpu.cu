// The gpKVS `cpu` mode (kvs_cpu.hpp).
#include "workloads/kvs/kvs_cpu.hpp"

#include <atomic>
#include <mutex>
#include <thread>

#include <gpm/platform/persist.hpp>

namespace gpmbench::kvs {

namespace {

std::uint64_t load(const std::uint64_t& w, std::memory_order o) {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(w)).load(o);
}
void store(std::uint64_t& w, std::uint64_t v, std::memory_order o) {
  std::atomic_ref<std::uint64_t>(w).store(v, o);
}

void add(batch_counters& to, const batch_counters& c) {
  to.log_failures += c.log_failures;
  to.evictions += c.evictions;
  to.get_misses += c.get_misses;
  to.bad_gets += c.bad_gets;
  to.sets += c.sets;
  to.logged += c.logged;
}

}  // namespace

cpu_store::cpu_store(const table_view& t, cpu_team& team)
    : t_(t), team_(team), locks_(t.count, 0), logged_epoch_(t.count * kWays, 0) {}

void cpu_store::set(flat_undo* undo, std::uint32_t region, std::uint64_t key, std::uint64_t value,
                    batch_counters& c, std::uint64_t& bytes) {
  const std::uint64_t b = t_.home(key);
  std::atomic_ref<std::uint32_t> lock(locks_[b]);
  for (std::uint32_t expected = 0;
       !lock.compare_exchange_weak(expected, 1, std::memory_order_acquire); expected = 0) {
    std::this_thread::yield();
  }
  unsigned found = 0, empty = 0;
  for (unsigned w = 0; w < kWays; ++w) {
    const std::uint64_t k = load(t_.buckets[b].ways[w].key, std::memory_order_relaxed);
    found |= unsigned{k == key} << w;
    empty |= unsigned{k == kEmptyKey} << w;
  }
  const unsigned w = choose_way(found, empty, key);
  slot& s = t_.buckets[b].ways[w];
  std::uint32_t& logged = logged_epoch_[b * kWays + w];
  if (undo != nullptr && logged != epoch_) {
    bytes += undo->save(region, &s, sizeof s);  // durable before the slot changes
    logged = epoch_;
    ++c.logged;
  }
  ++c.sets;
  c.evictions += found == 0 && empty == 0;
  // The slot protocol of set_key (kvs_kernels.cuh): withdraw an evicted key, then the value,
  // then the new key.
  if (!found && load(s.key, std::memory_order_relaxed) != kEmptyKey) {
    store(s.key, kEmptyKey, std::memory_order_relaxed);
  }
  store(s.value, value, std::memory_order_release);
  if (!found) store(s.key, key, std::memory_order_release);
  if (undo != nullptr) {
    gpm::write_back(&s, sizeof s);
    bytes += sizeof s;
  }
  lock.store(0, std::memory_order_release);
}

batch_counters cpu_store::run_batch(flat_undo& undo, const op_stream& ops, std::uint64_t batch,
                                    std::uint64_t count, std::uint64_t& bytes_persisted) {
  ++epoch_;
  undo.begin();
  const std::uint32_t regions = undo.regions();
  const std::uint64_t per_region = (count + regions - 1) / regions;
  batch_counters total{};
  std::mutex m;
  // One region per piece of the operations: parallel over regions, so that no two threads ever
  // share a region, however the team splits its loop.
  team_.parallel_for(regions, [&](std::uint64_t r_begin, std::uint64_t r_end) {
    for (std::uint64_t r = r_begin; r < r_end; ++r) {
      batch_counters c{};
      std::uint64_t bytes = 0;
      const std::uint64_t end = std::min(count, (r + 1) * per_region);
      for (std::uint64_t i = r * per_region; i < end; ++i) {
        const std::uint64_t key = ops.key(batch, i);
        if (ops.is_set(batch, i)) {
          set(&undo, static_cast<std::uint32_t>(r), key, value_of(key, batch), c, bytes);
          continue;
        }
        const bucket& b = t_.buckets[t_.home(key)];
        bool hit = false;
        for (unsigned w = 0; w < kWays && !hit; ++w) {
          if (load(b.ways[w].key, std::memory_order_acquire) != key) continue;
          const std::uint64_t v = load(b.ways[w].value, std::memory_order_acquire);
          if (load(b.ways[w].key, std::memory_order_relaxed) != key) continue;  // evicted: a miss
          hit = true;
          c.bad_gets += !get_is_valid(v, key, batch);
        }
        c.get_misses += !hit;
      }
      const std::lock_guard g(m);
      add(total, c);
      bytes_persisted += bytes;
    }
  });
  undo.commit();
  return total;
}

batch_counters cpu_store::preload(std::uint64_t universe) {
  ++epoch_;
  batch_counters total{};
  std::mutex m;
  team_.parallel_for(universe, [&](std::uint64_t begin, std::uint64_t end) {
    batch_counters c{};
    std::uint64_t bytes = 0;
    for (std::uint64_t i = begin; i < end; ++i)
      set(nullptr, 0, i + 1, value_of(i + 1, 0), c, bytes);
    const std::lock_guard g(m);
    add(total, c);
  });
  gpm::write_back(t_.buckets, t_.count * sizeof(bucket));
  return total;
}

}  // namespace gpmbench::kvs
