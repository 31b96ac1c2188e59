// BktCache (FAST'25 §3.3) on the host: its GPU buffers for one geometry of the table, its own
// stream, and the reload, whose kernels (bucket_cache.cu) run on that stream concurrently with
// operations. Built when the cache is enabled and again whenever the table's levels change.
// Volatile: nothing of it is in the pool. Internal to src/hash.
#pragma once

#include <array>
#include <cstdint>

#include <gpm/hash/gphash.cuh>
#include <gpm/platform/runtime.hpp>

namespace gpm::detail::hash {

// The reload's selection, as its kernels see it.
inline constexpr std::uint32_t kRadixBits[3] = {11, 11, 10};  // score bits per pass, high first
inline constexpr std::uint32_t kRadixBins = 1u << 11;

enum class chosen_state : std::uint8_t { no = 0, fetch = 1, resident = 2 };

struct select_state {
  std::uint32_t threshold;  // the score bits found so far (high bits first)
  unsigned long long need;  // buckets still to choose among those matching them
  unsigned long long ties;  // buckets of score == threshold taken by the mark kernel
  unsigned long long free_count;
  unsigned long long fetch_count;
};

struct cache_select {
  std::uint32_t* score;    // per bucket, the snapshot the passes select from
  std::uint32_t* hist;     // kRadixBins
  chosen_state* chosen;    // per bucket
  std::uint64_t* free_ys;  // cache buckets whose content was not chosen again
  std::uint64_t* ys;       // fetch assignments: cache bucket ys[i] <- table bucket xs[i]
  std::uint64_t* xs;
  select_state* st;
};

class bucket_cache {
 public:
  // Holds `options.fraction` of the `buckets` buckets of the live levels (at least one), each of
  // `slots` slots of `slot_words` words, and with `value_bytes` > 0 each slot's value of that
  // many bytes (the value cache; 0: values stay in the pool).
  bucket_cache(const cache_options& options, std::uint64_t buckets, std::uint32_t slots,
               std::uint32_t slot_words, std::uint32_t value_bytes);
  // A reload may still be running on the cache's stream.
  ~bucket_cache() { wait(); }
  bucket_cache(const bucket_cache&) = delete;
  bucket_cache& operator=(const bucket_cache&) = delete;

  // The kernels' view for the live levels [bottom, top] at batch `now` (LRU's clock).
  cache_view view(std::uint32_t now, std::uint32_t bottom, std::uint32_t top) const;

  // Chooses the hot buckets by the policy (`salt` seeds the random one) and fetches the changed
  // ones: kernels on the cache's stream, concurrent with operations; the host waits for nothing.
  // `v` is the table's live view, with this cache in it.
  void reload(const table_view& v, std::uint64_t salt);

  void wait() const { stream_.synchronize(); }
  std::uint64_t capacity() const { return capacity_; }
  // GPU memory of the value cache (0 when values are not cached).
  std::uint64_t value_bytes() const { return values_.size() * sizeof(std::uint64_t); }
  // Since it was built: slot reads served from the cache ([0]) and from the pool ([1]); finds'
  // values copied from the value cache ([2]), and those read from the pool although the valid
  // copy came from the cache ([3]).
  std::array<unsigned long long, 4> counts() const;

 private:
  // The reload's selection (cache_select).
  struct select_buffers {
    device_buffer<std::uint32_t> score, hist;
    device_buffer<chosen_state> chosen;
    device_buffer<std::uint64_t> free, ys, xs;
    device_buffer<select_state> state{1};
    cache_select view() const {
      return {score.data(), hist.data(), chosen.data(), free.data(),
              ys.data(),    xs.data(),   state.data()};
    }
  };

  cache_options options_;
  std::uint64_t capacity_;  // cache buckets
  device_buffer<std::uint32_t> map_, seq_, refs_, freq_, stamp_;
  device_buffer<std::uint64_t> owner_, slots_, values_;
  device_buffer<unsigned long long> counters_{4};
  select_buffers selection_;
  gpm::stream stream_{true};
};

}  // namespace gpm::detail::hash
