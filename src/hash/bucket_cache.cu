// BktCache on the host (see bucket_cache.hpp) and its reload kernels.
#include "bucket_cache.hpp"

#include <algorithm>

#include <gpm/hash/gphash_ref.cuh>
#include <gpm/platform/kernel.cuh>

#include "kernels.cuh"

namespace gpm::detail::hash {

namespace {

// ---- BktCache reload, all on the GPU -------------------------------------------------------
//
// A reload runs as kernels on the cache's own stream while operations go on: snapshot the
// policy's score of every bucket, find the score of the `keep`-th hottest by a three-pass radix
// select, mark the chosen buckets, free the cache buckets whose table bucket was not chosen,
// pair each newly chosen bucket with a free cache bucket, fetch. The host reads nothing back.

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
    // The mapping's store must be ordered before the copy's pool loads (store then load, as a
    // writer's pool store then its load of the mapping in cache_refresh): otherwise a writer
    // could find x not yet mapped while this copy read the pool from before its write, and y
    // would keep a stale slot (and value) until the next reload. A seq_cst store orders only what
    // precedes it, so every lane fences before it reads.
    atomic_thread_fence<thread_scope::device>(memory_order_seq_cst);
    const location at = bucket_of_global(c, x);
    for (std::uint32_t s = tile.thread_rank(); s < v.slots; s += tile.size()) {
      copy_slot_to_cache(v, at.level, at.bucket, s, y);
    }
    tile.sync();
    if (tile.thread_rank() == 0) {
      std::uint32_t expected = mapped;
      ref32(c.map[x]).compare_exchange_strong(expected, mapped | 1u);
    }
  }
}

}  // namespace

bucket_cache::bucket_cache(const cache_options& options, std::uint64_t buckets, std::uint32_t slots,
                           std::uint32_t slot_words, std::uint32_t value_bytes)
    : options_(options),
      capacity_(std::max<std::uint64_t>(
          1, std::min<std::uint64_t>(
                 buckets,
                 static_cast<std::uint64_t>(options.fraction * static_cast<double>(buckets))))) {
  const std::uint64_t K = slots;
  map_ = device_buffer<std::uint32_t>(buckets);
  map_.fill_bytes(0);
  freq_ = device_buffer<std::uint32_t>(buckets);
  freq_.fill_bytes(0);
  stamp_ = device_buffer<std::uint32_t>(buckets);
  stamp_.fill_bytes(0);
  seq_ = device_buffer<std::uint32_t>(capacity_ * K);
  seq_.fill_bytes(0);
  refs_ = device_buffer<std::uint32_t>(capacity_);
  refs_.fill_bytes(0);
  slots_ = device_buffer<std::uint64_t>(capacity_ * K * slot_words);
  if (value_bytes != 0) values_ = device_buffer<std::uint64_t>(capacity_ * K * (value_bytes / 8));
  owner_ = device_buffer<std::uint64_t>(capacity_);
  owner_.fill_bytes(0xff);  // kNone
  counters_.fill_bytes(0);
  selection_.score = device_buffer<std::uint32_t>(buckets);
  selection_.hist = device_buffer<std::uint32_t>(kRadixBins);
  selection_.chosen = device_buffer<chosen_state>(buckets);
  selection_.free = device_buffer<std::uint64_t>(capacity_);
  selection_.ys = device_buffer<std::uint64_t>(capacity_);
  selection_.xs = device_buffer<std::uint64_t>(capacity_);
  // The fills above are on the default stream; the cache's stream does not wait for it.
  check_cuda(cudaDeviceSynchronize(), "GPHash cache");
}

cache_view bucket_cache::view(std::uint32_t now, std::uint32_t bottom, std::uint32_t top) const {
  cache_view c;
  c.map = map_.data();
  c.owner = owner_.data();
  c.seq = seq_.data();
  c.refs = refs_.data();
  c.slots = slots_.data();
  c.values = values_.size() != 0 ? values_.data() : nullptr;
  c.freq = freq_.data();
  c.stamp = stamp_.data();
  c.counters = counters_.data();
  c.now = now;
  c.bottom = bottom;
  c.top = top;
  c.buckets = (2ull << top) - (1ull << bottom);
  c.capacity = capacity_;
  return c;
}

void bucket_cache::reload(const table_view& v, std::uint64_t salt) {
  const std::uint64_t buckets = map_.size();
  const std::uint64_t keep = std::min(capacity_, buckets);
  const cache_select sel = selection_.view();
  const cache_view& c = v.cache;
  const cudaStream_t cs = stream_.get();
  const std::uint32_t grid = blocks_for(buckets, kScanThreads);
  launch(select_begin_kernel, 1, kScanThreads, 0, cs, sel, keep);
  launch(select_score_kernel, grid, kScanThreads, 0, cs, c, sel, options_.policy, salt);
  std::uint32_t shift = 32;
  for (const std::uint32_t width : kRadixBits) {
    shift -= width;
    launch(select_histogram_kernel, grid, kScanThreads, kRadixBins * sizeof(std::uint32_t), cs,
           buckets, sel, shift, width);
    launch(select_bin_kernel, 1, 1, 0, cs, sel, shift, width);
  }
  launch(select_mark_kernel, grid, kScanThreads, 0, cs, buckets, sel);
  launch(select_free_kernel, blocks_for(capacity_, kScanThreads), kScanThreads, 0, cs, c, sel);
  launch(select_assign_kernel, grid, kScanThreads, 0, cs, buckets, sel);
  launch(cache_fetch_kernel, blocks_for(capacity_ * 32, 256), 256, 0, cs, v, sel);
}

std::array<unsigned long long, 4> bucket_cache::counts() const {
  std::array<unsigned long long, 4> c{};
  check_cuda(cudaMemcpy(c.data(), counters_.data(), sizeof c, cudaMemcpyDeviceToHost),
             "cudaMemcpy");
  return c;
}

}  // namespace gpm::detail::hash
