// Conformance, cooperative groups: thread_block and thread_block_tile<N> for every N from 1 to
// 32 (typed over N), including tiles nested in tiles. Same expectations on both backends.
#include <gpm/platform/kernel.cuh>

#include "gpm_test.hpp"

namespace {

constexpr int kResults = 12;
constexpr int kThreads = 128;
constexpr int kBlocks = 3;

template <unsigned N>
__global__ void tile_ops(const unsigned* values, unsigned* out) {
  cg::thread_block block = cg::this_thread_block();
  auto tile = cg::tiled_partition<N>(block);
  const unsigned gid = blockIdx.x * blockDim.x + block.thread_rank();
  const unsigned v = values[gid];
  unsigned* o = out + gid * kResults;
  o[0] = tile.thread_rank();
  o[1] = tile.num_threads();
  o[2] = tile.meta_group_rank();
  o[3] = tile.meta_group_size();
  o[4] = tile.ballot(v % 2 == 0);
  o[5] = static_cast<unsigned>(tile.any(v % 7 == 0));
  o[6] = static_cast<unsigned>(tile.all(v % 7 != 3));
  o[7] = tile.shfl(v, static_cast<int>((tile.thread_rank() + 1) % N));
  o[8] = tile.shfl_down(v, 1);
  o[9] = tile.shfl_up(v, 1);
  o[10] = tile.shfl_xor(v, N / 2);
  o[11] = tile.match_any(v % 3);
  tile.sync();
  block.sync();
}

template <class T>
class ConformanceTiles : public ::testing::Test {};

template <unsigned N>
struct tile_size {
  static constexpr unsigned value = N;
};
using TileSizes = ::testing::Types<tile_size<1>, tile_size<2>, tile_size<4>, tile_size<8>,
                                   tile_size<16>, tile_size<32>>;
TYPED_TEST_SUITE(ConformanceTiles, TileSizes);

TYPED_TEST(ConformanceTiles, EveryOperation) {
  constexpr unsigned N = TypeParam::value;
  const int total = kThreads * kBlocks;
  auto values = gpm::test::random_values<unsigned>(total, 20 + N, 0, 1u << 20);
  auto d_values = gpm::test::to_device(values);
  gpm::device_buffer<unsigned> d_out(total * kResults);
  gpm::launch(tile_ops<N>, kBlocks, kThreads, 0, nullptr, d_values.data(), d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (int gid = 0; gid < total; ++gid) {
    const unsigned t = static_cast<unsigned>(gid % kThreads);
    const unsigned rank = t % N;
    const unsigned first = static_cast<unsigned>(gid) - rank;  // first member of this tile
    const unsigned* v = &values[first];
    unsigned ballot = 0, match = 0;
    bool any7 = false, all_not3 = true;
    for (unsigned r = 0; r < N; ++r) {
      ballot |= (v[r] % 2 == 0 ? 1u : 0u) << r;
      any7 |= v[r] % 7 == 0;
      all_not3 &= v[r] % 7 != 3;
      match |= (v[r] % 3 == v[rank] % 3 ? 1u : 0u) << r;
    }
    const unsigned* o = &out[gid * kResults];
    ASSERT_EQ(o[0], rank);
    ASSERT_EQ(o[1], N);
    ASSERT_EQ(o[2], t / N);
    ASSERT_EQ(o[3], kThreads / N);
    ASSERT_EQ(o[4], ballot) << "thread " << gid;
    ASSERT_EQ(o[5] != 0, any7);
    ASSERT_EQ(o[6] != 0, all_not3);
    ASSERT_EQ(o[7], v[(rank + 1) % N]);
    ASSERT_EQ(o[8], rank + 1 < N ? v[rank + 1] : v[rank]);
    ASSERT_EQ(o[9], rank >= 1 ? v[rank - 1] : v[rank]);
    ASSERT_EQ(o[10], v[rank ^ (N / 2)]);
    ASSERT_EQ(o[11], match);
  }
}

// A tile of 4 inside a tile of 16 inside the block.
__global__ void nested_tiles(unsigned* out) {
  auto block = cg::this_thread_block();
  auto t16 = cg::tiled_partition<16>(block);
  auto t4 = cg::tiled_partition<4>(t16);
  const unsigned id = block.thread_rank();
  out[id * 4 + 0] = t4.thread_rank();
  out[id * 4 + 1] = t4.meta_group_rank();
  out[id * 4 + 2] = t4.meta_group_size();
  out[id * 4 + 3] = t4.shfl(id, 3);
}

TEST(ConformanceTilesNested, TileOfTile) {
  gpm::device_buffer<unsigned> d_out(64 * 4);
  gpm::launch(nested_tiles, 1, 64, 0, nullptr, d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (unsigned id = 0; id < 64; ++id) {
    EXPECT_EQ(out[id * 4 + 0], id % 4);
    EXPECT_EQ(out[id * 4 + 1], (id % 16) / 4);
    EXPECT_EQ(out[id * 4 + 2], 4u);
    EXPECT_EQ(out[id * 4 + 3], id - id % 4 + 3);
  }
}

__global__ void block_group(uint4* out) {
  auto block = cg::this_thread_block();
  const unsigned r = block.thread_rank();
  out[r] = make_uint4(r, block.num_threads(), block.thread_index().y, block.group_index().x);
  block.sync();
}

TEST(ConformanceTilesNested, ThreadBlockGroup) {
  gpm::device_buffer<uint4> d_out(8 * 6);
  gpm::launch(block_group, 1, dim3(8, 6), 0, nullptr, d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (unsigned r = 0; r < 48; ++r) {
    EXPECT_EQ(out[r].x, r);
    EXPECT_EQ(out[r].y, 48u);
    EXPECT_EQ(out[r].z, r / 8);
    EXPECT_EQ(out[r].w, 0u);
  }
}

}  // namespace
