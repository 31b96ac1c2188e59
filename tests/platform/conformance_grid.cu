// Conformance, grid helpers (platform/grid.cuh): tile_index / tile_count, grid_stride ranges over
// threads and tiles (every index visited exactly once, by the right tile, empty and offset
// ranges), single_thread's collectives, make_tile and tile_max_pair. Same expectations
// on both backends.
#include <gpm/platform/hash.hpp>
#include <gpm/platform/kernel.cuh>

#include "gpm_test.hpp"

namespace {

constexpr unsigned kThreads = 96;
constexpr unsigned kBlocks = 5;

// visits[i] counts the tiles that visited i; owner[i] is the tile index that did (+1).
template <unsigned G>
__global__ void stride_visits(std::uint64_t begin, std::uint64_t end, unsigned* visits,
                              std::uint64_t* owner) {
  for (std::uint64_t i : gpm::grid_stride<G>(begin, end)) {
    if (gpm::make_tile<G>().thread_rank() != 0) continue;
    atomicAdd(&visits[i], 1u);
    owner[i] = gpm::tile_index<G>() + 1;
  }
}

template <unsigned G>
__global__ void tile_geometry(std::uint64_t* index, std::uint64_t* count) {
  const std::uint64_t t = gpm::tile_index();
  index[t] = gpm::tile_index<G>();
  count[t] = gpm::tile_count<G>();
}

// The (prio, value) pair thread t offers in a tile of G: a hash of t and t; or, with ties, one
// priority per group of 4 lanes (so the highest group ties) and values that differ.
GPM_HOST_DEVICE inline void offer(std::uint64_t t, unsigned G, bool ties, std::uint64_t& prio,
                                  std::uint64_t& value) {
  prio = ties ? t % G / 4 : gpm::mix64(t) >> 8;
  value = ties ? gpm::mix64(t) : t;
}

// Every lane offers its pair; out gets the tile's answer.
template <unsigned G>
__global__ void tile_reductions(bool ties, std::uint64_t* pair_prio, std::uint64_t* pair_value) {
  const auto tile = gpm::make_tile<G>();
  const std::uint64_t t = gpm::tile_index();
  std::uint64_t prio = 0, value = 0;
  offer(t, G, ties, prio, value);
  gpm::tile_max_pair(tile, prio, value);
  pair_prio[t] = prio;
  pair_value[t] = value;
}

template <class T>
class ConformanceGrid : public ::testing::Test {};

template <unsigned N>
struct tile_size {
  static constexpr unsigned value = N;
};
using TileSizes = ::testing::Types<tile_size<1>, tile_size<4>, tile_size<32>>;
TYPED_TEST_SUITE(ConformanceGrid, TileSizes);

template <unsigned G>
void check_stride(std::uint64_t begin, std::uint64_t end, std::uint64_t bound) {
  gpm::device_buffer<unsigned> visits(bound);
  gpm::device_buffer<std::uint64_t> owner(bound);
  gpm::check_cuda(cudaMemset(visits.data(), 0, bound * sizeof(unsigned)), "memset");
  gpm::check_cuda(cudaMemset(owner.data(), 0, bound * sizeof(std::uint64_t)), "memset");
  gpm::launch(stride_visits<G>, kBlocks, kThreads, 0, nullptr, begin, end, visits.data(),
              owner.data());
  const auto v = gpm::test::to_host(visits);
  const auto o = gpm::test::to_host(owner);
  const std::uint64_t tiles = std::uint64_t{kBlocks} * kThreads / G;
  for (std::uint64_t i = 0; i < bound; ++i) {
    const bool inside = i >= begin && i < end;
    ASSERT_EQ(v[i], inside ? 1u : 0u) << "index " << i << " of [" << begin << ", " << end << ")";
    if (inside) {
      EXPECT_EQ(o[i], (i - begin) % tiles + 1) << "index " << i;
    }
  }
}

TYPED_TEST(ConformanceGrid, StrideVisitsEveryIndexOnce) {
  constexpr unsigned G = TypeParam::value;
  const std::uint64_t tiles = std::uint64_t{kBlocks} * kThreads / G;
  check_stride<G>(0, 3 * tiles + 7, 3 * tiles + 20);  // several rounds and a partial one
  check_stride<G>(0, tiles / 2, tiles);                // fewer items than tiles
  check_stride<G>(11, 2 * tiles + 3, 2 * tiles + 10);  // an offset start
  check_stride<G>(0, 0, 8);                            // empty
  check_stride<G>(9, 4, 16);                           // begin past end: empty, no wrap
}

TYPED_TEST(ConformanceGrid, TileIndexAndCount) {
  constexpr unsigned G = TypeParam::value;
  const std::uint64_t threads = std::uint64_t{kBlocks} * kThreads;
  gpm::device_buffer<std::uint64_t> index(threads), count(threads);
  gpm::launch(tile_geometry<G>, kBlocks, kThreads, 0, nullptr, index.data(), count.data());
  const auto i = gpm::test::to_host(index);
  const auto c = gpm::test::to_host(count);
  for (std::uint64_t t = 0; t < threads; ++t) {
    EXPECT_EQ(i[t], t / G);
    EXPECT_EQ(c[t], threads / G);
  }
}

// Every lane gets its tile's greatest pair; equal priorities go to the larger value, so that the
// lanes agree (the hash engine relies on it to know which lane read the winning copy).
TYPED_TEST(ConformanceGrid, TileMaxPair) {
  constexpr unsigned G = TypeParam::value;
  const std::uint64_t threads = std::uint64_t{kBlocks} * kThreads;
  for (const bool ties : {false, true}) {
    gpm::device_buffer<std::uint64_t> prio(threads), value(threads);
    gpm::launch(tile_reductions<G>, kBlocks, kThreads, 0, nullptr, ties, prio.data(), value.data());
    const auto p = gpm::test::to_host(prio);
    const auto v = gpm::test::to_host(value);
    for (std::uint64_t t = 0; t < threads; ++t) {
      const std::uint64_t first = t - t % G;
      std::uint64_t best = 0, arg = 0;
      offer(first, G, ties, best, arg);
      for (std::uint64_t u = first + 1; u < first + G; ++u) {
        std::uint64_t q = 0, w = 0;
        offer(u, G, ties, q, w);
        if (q > best || (q == best && w > arg)) best = q, arg = w;
      }
      EXPECT_EQ(p[t], best) << (ties ? "ties, " : "") << "thread " << t;
      EXPECT_EQ(v[t], arg) << (ties ? "ties, " : "") << "thread " << t;
    }
  }
}

// single_thread is what make_tile<1>() returns: a tile of one with the collectives of a tile.
__global__ void single_thread_ops(std::int64_t* out) {
  const auto t = gpm::make_tile<1>();
  static_assert(std::is_same_v<decltype(t), const gpm::single_thread>);
  static_assert(gpm::single_thread::size() == 1 && gpm::single_thread::num_threads() == 1);
  out[0] = t.thread_rank();
  out[1] = t.ballot(5);
  out[2] = t.ballot(0);
  out[3] = t.any(2);
  out[4] = t.all(0);
  out[5] = t.shfl(std::int64_t{42}, 7);
  out[6] = t.shfl_xor(std::int64_t{-3}, 1u);
  t.sync();
}

TEST(ConformanceGrid, SingleThreadCollectives) {
  gpm::device_buffer<std::int64_t> out(7);
  gpm::launch(single_thread_ops, 1, 1, 0, nullptr, out.data());
  EXPECT_EQ(gpm::test::to_host(out), (std::vector<std::int64_t>{0, 1, 0, 1, 0, 42, -3}));
}

}  // namespace
