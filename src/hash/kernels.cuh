// GPHash's internal kernels: bulk operations, recovery scans, rehash, reclaim and BktCache
// fetching. Included only by src/hash/gphash.cu.
#pragma once

#include <gpm/hash/gphash_ref.cuh>
#include <gpm/platform/kernel.cuh>

namespace gpm::detail::hash {

enum class bulk_op { insert, upsert, update, find, erase };

struct bulk_args {
  const void* keys;
  const std::byte* values;
  std::byte* out;
  hash_status* status;
  std::uint64_t n;
  const std::uint64_t* index;  // when set, item i is keys[index[i]]
  std::uint64_t* retry;        // insert/upsert: indices that found no slot or value cell
  unsigned long long* retry_count;
};

template <class Key, unsigned G, bulk_op Op>
__global__ void bulk_kernel(table_view v, bulk_args a) {
  const auto tile = make_tile<G>();
  const Key* keys = static_cast<const Key*>(a.keys);
  for (std::uint64_t i : grid_stride<G>(a.n)) {
    const std::uint64_t k = a.index != nullptr ? a.index[i] : i;
    const Key key = keys[k];
    const std::uint64_t at = k * v.value_bytes;  // values are packed: value_bytes each
    hash_status st;
    if constexpr (Op == bulk_op::insert) {
      st = insert<Key>(v, tile, key, a.values + at, insert_mode::insert);
    } else if constexpr (Op == bulk_op::upsert) {
      st = insert<Key>(v, tile, key, a.values + at, insert_mode::upsert);
    } else if constexpr (Op == bulk_op::update) {
      st = update<Key>(v, tile, key, a.values + at);
    } else if constexpr (Op == bulk_op::find) {
      st = find<Key>(v, tile, key, a.out != nullptr ? a.out + at : nullptr);
    } else {
      st = erase<Key>(v, tile, key);
    }
    if (tile.thread_rank() == 0) {
      if (a.status != nullptr) a.status[k] = st;
      // Out of slots, or out of value cells because other inserts in flight held them: both are
      // retried after a resize, which adds slots and value cells.
      if ((st == hash_status::full || st == hash_status::no_value_space) && a.retry != nullptr) {
        a.retry[atomicAdd(a.retry_count, 1ull)] = k;
      }
    }
  }
}

// One level's slots, one per thread: clears INSERTING slots left by a crash (recovery), counts
// published items, and marks the value cells they reference (allocator rebuild).
enum class scan_op { clear_inserting, count_items, mark_cells };

template <scan_op Op>
__global__ void scan_kernel(table_view v, std::uint32_t level, unsigned long long* count) {
  const std::uint64_t slots = (1ull << level) * v.slots;
  for (std::uint64_t i : grid_stride(slots)) {
    const slot_ref slot = slot_at(v, level, i / v.slots, static_cast<std::uint32_t>(i % v.slots));
    const std::uint64_t word = load_word(&slot[0]);
    if constexpr (Op == scan_op::clear_inserting) {
      if (word == kInserting) {
        atomic_ref<std::uint64_t, pool_scope>(slot[0]).store(kEmpty);
        gpm::persist();
        atomicAdd(count, 1ull);
      }
    } else if constexpr (Op == scan_op::count_items) {
      if (is_published(word)) atomicAdd(count, 1ull);
    } else {
      if (!is_published(word)) continue;
      const std::uint64_t cell = cell_of(v, load_word(&slot[1]));
      if (cell == kNone) {
        atomicAdd(count, 1ull);  // a value offset outside the value area: corruption
      } else {
        atomicOr(reinterpret_cast<unsigned long long*>(&v.bitmap[cell / 64]),
                 static_cast<unsigned long long>(1ull << (cell % 64)));
      }
    }
  }
}

// Recovery: a published copy that is not the valid copy of its key (a crash inside a rehash, or
// a table written before inserts checked for conflicts) is cleared. The valid copy is never
// cleared, so one pass in parallel suffices. One warp per slot.
template <class Key>
__global__ void dedupe_kernel(table_view v, std::uint32_t level, unsigned long long* removed) {
  const auto tile = make_tile<32>();
  const std::uint64_t slots = (1ull << level) * v.slots;
  for (std::uint64_t i : grid_stride<32>(slots)) {
    const std::uint64_t bucket = i / v.slots;
    const auto s = static_cast<std::uint32_t>(i % v.slots);
    const slot_ref slot = slot_at(v, level, bucket, s);
    const slot_image img = load_slot<Key>(slot);
    if (!is_published(img.word)) continue;
    const Key key = key_ops<Key>::key_at(v, img);
    const std::uint64_t h = key_ops<Key>::hash(key, v.seed);
    const probe_result r = probe(v, tile, key, h, img.word, false);
    if (r.match != copy_rank(level, bucket, s) && tile.thread_rank() == 0) {
      atomic_ref<std::uint64_t, pool_scope>(slot[0]).store(kEmpty);
      gpm::persist();
      atomicAdd(removed, 1ull);
    }
  }
}

// Resize: moves every item of the drained bottom level into the levels above it (`upper`
// addresses the new top and excludes the bottom). An item is inserted above (or found there,
// when a crash interrupted an earlier rehash of it), then cleared below: after a crash it is in
// one place or both, never lost. One warp per slot (warp-cooperative rehash).
template <class Key>
__global__ void rehash_kernel(table_view upper, table_view all, std::uint32_t bottom,
                              unsigned long long* failures) {
  const auto tile = make_tile<32>();
  const std::uint64_t slots = (1ull << bottom) * all.slots;
  for (std::uint64_t i : grid_stride<32>(slots)) {
    const std::uint64_t bucket = i / all.slots;
    const auto s = static_cast<std::uint32_t>(i % all.slots);
    const slot_ref slot = slot_at(all, bottom, bucket, s);
    const slot_image img = load_slot<Key>(slot);
    if (!is_published(img.word)) continue;
    const hash_status st = insert<Key>(upper, tile, key_ops<Key>::key_at(all, img), nullptr,
                                       insert_mode::rehash, img.value);
    if (tile.thread_rank() == 0) {
      if (st == hash_status::inserted || st == hash_status::exists) {
        kernel_crash_point("gphash.rehash.copied");
        atomic_ref<std::uint64_t, pool_scope>(slot[0]).store(kEmpty);
        gpm::persist();
      } else {
        atomicAdd(failures, 1ull);
      }
    }
  }
}

// Makes retired value cells free again: folds the retired bits into the allocator's bitmap.
__global__ void reclaim_kernel(table_view v) {
  for (std::uint64_t w : grid_stride(v.bitmap_words)) {
    const std::uint64_t r = v.retired[w];
    if (r != 0) {
      v.retired[w] = 0;
      atomicAnd(reinterpret_cast<unsigned long long*>(&v.bitmap[w]),
                static_cast<unsigned long long>(~r));
    }
  }
}

// ---- BktCache reload, all on the GPU -------------------------------------------------------
//
// A reload runs as kernels on the cache's own stream while operations go on: snapshot the
// policy's score of every bucket, find the score of the `keep`-th hottest by a three-pass radix
// select, mark the chosen buckets, free the cache buckets whose table bucket was not chosen,
// pair each newly chosen bucket with a free cache bucket, fetch. The host reads nothing back.

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

__global__ void select_begin_kernel(cache_select sel, std::uint64_t keep) {
  for (std::uint32_t b = threadIdx.x; b < kRadixBins; b += blockDim.x) sel.hist[b] = 0;
  if (threadIdx.x == 0) *sel.st = {0, keep, 0, 0, 0};
}

// LFU: the access count, halved in place (aging, so the choice follows a shifting hot set); LRU:
// the batch of the last access; random: a hash salted per reload.
__global__ void select_score_kernel(cache_view c, cache_select sel, cache_policy policy,
                                    std::uint64_t salt) {
  using ref32 = atomic_ref<std::uint32_t, thread_scope::device>;
  for (std::uint64_t x : grid_stride(c.buckets)) {
    std::uint32_t score = 0;
    if (policy == cache_policy::lfu) {
      score = ref32(c.freq[x]).load(memory_order_relaxed);
      ref32(c.freq[x]).store(score / 2, memory_order_relaxed);  // racing increments may be lost
    } else if (policy == cache_policy::lru) {
      score = ref32(c.stamp[x]).load(memory_order_relaxed);
    } else {
      score = static_cast<std::uint32_t>(mix64(x ^ salt) >> 32);
    }
    sel.score[x] = score;
  }
}

// One radix pass: a histogram of score bits [shift, shift + width) over the buckets whose higher
// bits equal the threshold found so far. Per-block histograms live in dynamic shared memory.
__global__ void select_histogram_kernel(std::uint64_t buckets, cache_select sel,
                                        std::uint32_t shift, std::uint32_t width) {
  std::uint32_t* local = dynamic_shared_memory<std::uint32_t>();
  const std::uint32_t bins = 1u << width;
  for (std::uint32_t b = threadIdx.x; b < bins; b += blockDim.x) local[b] = 0;
  __syncthreads();
  const std::uint64_t above = static_cast<std::uint64_t>(sel.st->threshold) >> (shift + width);
  for (std::uint64_t x : grid_stride(buckets)) {
    const std::uint64_t score = sel.score[x];
    if ((score >> (shift + width)) == above) atomicAdd(&local[(score >> shift) & (bins - 1)], 1u);
  }
  __syncthreads();
  for (std::uint32_t b = threadIdx.x; b < bins; b += blockDim.x) {
    if (local[b] != 0) atomicAdd(&sel.hist[b], local[b]);
  }
}

// One thread: the bin, from the top, where the count of chosen buckets reaches `need`; its bits
// join the threshold and `need` becomes the number to take from it. Clears the histogram.
__global__ void select_bin_kernel(cache_select sel, std::uint32_t shift, std::uint32_t width) {
  auto& st = *sel.st;
  unsigned long long above = 0;
  bool found = false;
  for (std::uint32_t b = 1u << width; b-- > 0;) {
    const unsigned long long n = sel.hist[b];
    sel.hist[b] = 0;
    if (found) continue;
    if (above + n >= st.need) {
      st.threshold |= b << shift;
      st.need -= above;
      found = true;
    }
    above += n;
  }
}

// Marks the buckets scoring above the threshold, and `need` of those scoring exactly it.
__global__ void select_mark_kernel(std::uint64_t buckets, cache_select sel) {
  const std::uint32_t t = sel.st->threshold;
  const unsigned long long need = sel.st->need;
  for (std::uint64_t x : grid_stride(buckets)) {
    const std::uint32_t score = sel.score[x];
    const bool take = score > t || (score == t && atomicAdd(&sel.st->ties, 1ull) < need);
    sel.chosen[x] = take ? chosen_state::fetch : chosen_state::no;
  }
}

// Cache buckets holding a chosen table bucket keep it (frozen); the others become free.
__global__ void select_free_kernel(cache_view c, cache_select sel) {
  for (std::uint64_t y : grid_stride(c.capacity)) {
    const std::uint64_t x = c.owner[y];
    if (x < c.buckets && sel.chosen[x] != chosen_state::no) {
      sel.chosen[x] = chosen_state::resident;
    } else {
      sel.free_ys[atomicAdd(&sel.st->free_count, 1ull)] = y;
    }
  }
}

// Pairs each chosen bucket that is not resident with a free cache bucket (there are enough: at
// most `keep` <= capacity buckets are chosen).
__global__ void select_assign_kernel(std::uint64_t buckets, cache_select sel) {
  for (std::uint64_t x : grid_stride(buckets)) {
    if (sel.chosen[x] != chosen_state::fetch) continue;
    const unsigned long long i = atomicAdd(&sel.st->fetch_count, 1ull);
    if (i < sel.st->free_count) {
      sel.ys[i] = sel.free_ys[i];
      sel.xs[i] = x;
    }
  }
}

// BktCache concurrent fetching (FAST'25 §3.3, Figure 4): for each assignment (cache bucket y <-
// table bucket x), one warp invalidates y's old mapping, waits for writers inside y to leave,
// marks x as being fetched into y (writers then keep y's copy current), copies x slot by slot
// under the slots' seqlocks, and finally validates the mapping for readers.
__global__ void cache_fetch_kernel(table_view v, cache_select sel) {
  const auto tile = make_tile<32>();
  const cache_view& c = v.cache;
  using ref32 = atomic_ref<std::uint32_t, thread_scope::device>;
  const std::uint64_t n =
      sel.st->fetch_count < sel.st->free_count ? sel.st->fetch_count : sel.st->free_count;
  const std::uint64_t* ys = sel.ys;
  const std::uint64_t* xs = sel.xs;
  for (std::uint64_t i : grid_stride<32>(n)) {
    const std::uint64_t y = ys[i];
    const std::uint64_t x = xs[i];
    const std::uint32_t mapped = static_cast<std::uint32_t>((y + 1) << 1);
    if (tile.thread_rank() == 0) {
      const std::uint64_t old = c.owner[y];
      if (old != kNone) ref32(c.map[old]).store(0);
      while (ref32(c.refs[y]).load() != 0) __nanosleep(64);
      c.owner[y] = x;
      ref32(c.map[x]).store(mapped);  // fetching: writers update y, readers still skip it
    }
    tile.sync();
    // Global bucket x back to (level, bucket).
    std::uint32_t level = c.bottom;
    while (level < c.top && (1ull << (level + 1)) - (1ull << c.bottom) <= x) ++level;
    const std::uint64_t bucket = x + (1ull << c.bottom) - (1ull << level);
    for (std::uint32_t s = tile.thread_rank(); s < v.slots; s += tile.size()) {
      copy_slot_to_cache(v, level, bucket, s, y);
    }
    tile.sync();
    if (tile.thread_rank() == 0) {
      std::uint32_t expected = mapped;
      ref32(c.map[x]).compare_exchange_strong(expected, mapped | 1u);
    }
  }
}

}  // namespace gpm::detail::hash
