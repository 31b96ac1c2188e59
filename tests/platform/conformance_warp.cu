// Conformance, warp level: every warp intrinsic with full and partial masks, every shuffle width,
// 4- and 8-byte types, a partial last warp and __activemask. Expected values are computed on the
// host from CUDA's definitions; the same assertions run on both backends.
#include <gpm/platform/kernel.cuh>

#include <array>
#include <cstdint>

#include "gpm_test.hpp"

namespace {

constexpr unsigned kFull = 0xffffffffu;
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

unsigned host_value(unsigned tid) { return (tid * 2654435761u) >> 7; }

// Lane l of a segment of `width` reads from `src`; out-of-segment sources keep their own value.
unsigned shfl_src(int op, unsigned lane, int arg, int width) {
  const int seg = static_cast<int>(lane) & ~(width - 1);
  const int l = static_cast<int>(lane);
  switch (op) {
    case 0: return static_cast<unsigned>(seg + (arg & (width - 1)));
    case 1: return static_cast<unsigned>(l - arg >= seg ? l - arg : l);
    case 2: return static_cast<unsigned>(l + arg < seg + width ? l + arg : l);
    default: {
      const int x = l ^ arg;
      return static_cast<unsigned>(x < seg + width ? x : l);
    }
  }
}

constexpr int kWidths[] = {1, 2, 4, 8, 16, 32};
constexpr int kShflResults = 4 * 6;  // 4 kinds x 6 widths

__global__ void shuffles(unsigned* out) {
  const unsigned tid = threadIdx.x;
  const unsigned lane = tid % 32;
  const unsigned v = (tid * 2654435761u) >> 7;
  unsigned* o = out + tid * kShflResults;
  int k = 0;
  for (int w = 1; w <= 32; w *= 2) {
    o[k++] = __shfl_sync(kFull, v, static_cast<int>(lane * 7 + 3), w);
    o[k++] = __shfl_up_sync(kFull, v, 3, w);
    o[k++] = __shfl_down_sync(kFull, v, 5, w);
    o[k++] = __shfl_xor_sync(kFull, v, static_cast<int>((lane % 5) + 1), w);
  }
}

TEST(ConformanceWarp, ShufflesAllWidths) {
  gpm::device_buffer<unsigned> d_out(kThreads * kShflResults);
  gpm::launch(shuffles, 1, kThreads, 0, nullptr, d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (unsigned tid = 0; tid < kThreads; ++tid) {
    const unsigned lane = tid % 32, base = tid - lane;
    int k = 0;
    for (int w : kWidths) {
      const int args[4] = {static_cast<int>(lane * 7 + 3), 3, 5, static_cast<int>((lane % 5) + 1)};
      for (int op = 0; op < 4; ++op, ++k) {
        const unsigned src = shfl_src(op, lane, args[op], w);
        ASSERT_EQ(out[tid * kShflResults + k], host_value(base + src))
            << "thread " << tid << " op " << op << " width " << w;
      }
    }
  }
}

struct typed_results {
  float f;
  double d;
  long long ll;
  unsigned long long ull;
  int i;
};

__global__ void typed_shuffles(typed_results* out) {
  const unsigned lane = threadIdx.x % 32;
  typed_results r;
  r.f = __shfl_sync(kFull, 0.5f * static_cast<float>(lane), 31 - static_cast<int>(lane));
  r.d = __shfl_down_sync(kFull, 1.0e300 * static_cast<double>(lane), 1);
  r.ll = __shfl_xor_sync(kFull, -(1ll << 40) * static_cast<long long>(lane), 16);
  r.ull = __shfl_up_sync(kFull, (1ull << 63) | lane, 2);
  r.i = __shfl_sync(kFull, -static_cast<int>(lane), 0);
  out[threadIdx.x] = r;
}

TEST(ConformanceWarp, ShufflesOfEightByteAndFloatTypes) {
  gpm::device_buffer<typed_results> d_out(64);
  gpm::launch(typed_shuffles, 1, 64, 0, nullptr, d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (unsigned t = 0; t < 64; ++t) {
    const unsigned lane = t % 32;
    EXPECT_EQ(out[t].f, 0.5f * static_cast<float>(31 - lane));
    EXPECT_EQ(out[t].d, 1.0e300 * static_cast<double>(lane + 1 < 32 ? lane + 1 : lane));
    EXPECT_EQ(out[t].ll, -(1ll << 40) * static_cast<long long>(lane ^ 16));
    EXPECT_EQ(out[t].ull, (1ull << 63) | (lane >= 2 ? lane - 2 : lane));
    EXPECT_EQ(out[t].i, 0);
  }
}

constexpr int kVoteResults = 16;

__global__ void votes(const unsigned* values, unsigned* out) {
  const unsigned tid = threadIdx.x;
  const unsigned v = values[tid];
  unsigned* o = out + tid * kVoteResults;
  o[0] = __ballot_sync(kFull, v % 3 == 0);
  o[1] = __any_sync(kFull, v % 97 == 0);
  o[2] = __all_sync(kFull, v % 2 == 0);
  o[3] = __all_sync(kFull, v != 12345678u);
  o[4] = __match_any_sync(kFull, v % 5);
  int pred = -1;
  o[5] = __match_all_sync(kFull, v % 5, &pred);
  o[6] = static_cast<unsigned>(pred);
  o[7] = __match_all_sync(kFull, 42ull, &pred);
  o[8] = static_cast<unsigned>(pred);
  o[9] = __reduce_add_sync(kFull, v % 1000);
  o[10] = __reduce_min_sync(kFull, v);
  o[11] = __reduce_max_sync(kFull, v);
  o[12] = static_cast<unsigned>(__reduce_min_sync(kFull, static_cast<int>(v) - (1 << 29)));
  o[13] = __reduce_and_sync(kFull, v | 0x80000001u);
  o[14] = __reduce_or_sync(kFull, v & 0x00ff00ffu);
  o[15] = __reduce_xor_sync(kFull, v);
  __syncwarp();
}

TEST(ConformanceWarp, VoteMatchReduce) {
  auto values = gpm::test::random_values<unsigned>(kThreads, 11, 0, 1u << 30);
  values[5] = 0;  // 0 % 97 == 0: warp 0 has an "any"
  for (int l = 0; l < 32; ++l) values[64 + l] = 2u * static_cast<unsigned>(l);  // warp 2 all even
  auto d_values = gpm::test::to_device(values);
  gpm::device_buffer<unsigned> d_out(kThreads * kVoteResults);
  gpm::launch(votes, 1, kThreads, 0, nullptr, d_values.data(), d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (int w = 0; w < kWarps; ++w) {
    const unsigned* v = &values[w * 32];
    unsigned ballot = 0, add = 0, umin = ~0u, umax = 0, and_all = ~0u, or_all = 0, x = 0;
    int smin = INT32_MAX;
    bool any97 = false, all_even = true;
    for (int l = 0; l < 32; ++l) {
      ballot |= (v[l] % 3 == 0 ? 1u : 0u) << l;
      any97 |= v[l] % 97 == 0;
      all_even &= v[l] % 2 == 0;
      add += v[l] % 1000;
      umin = std::min(umin, v[l]);
      umax = std::max(umax, v[l]);
      smin = std::min(smin, static_cast<int>(v[l]) - (1 << 29));
      and_all &= v[l] | 0x80000001u;
      or_all |= v[l] & 0x00ff00ffu;
      x ^= v[l];
    }
    bool all_same_mod5 = true;
    for (int l = 0; l < 32; ++l) all_same_mod5 &= v[l] % 5 == v[0] % 5;
    for (int l = 0; l < 32; ++l) {
      const unsigned* o = &out[(w * 32 + l) * kVoteResults];
      unsigned match = 0;
      for (int m = 0; m < 32; ++m) match |= (v[m] % 5 == v[l] % 5 ? 1u : 0u) << m;
      EXPECT_EQ(o[0], ballot);
      EXPECT_EQ(o[1] != 0, any97);
      EXPECT_EQ(o[2] != 0, all_even);
      EXPECT_NE(o[3], 0u);
      EXPECT_EQ(o[4], match);
      EXPECT_EQ(o[5], all_same_mod5 ? kFull : 0u);
      EXPECT_EQ(o[6] != 0, all_same_mod5);
      EXPECT_EQ(o[7], kFull);
      EXPECT_EQ(o[8], 1u);
      EXPECT_EQ(o[9], add);
      EXPECT_EQ(o[10], umin);
      EXPECT_EQ(o[11], umax);
      EXPECT_EQ(static_cast<int>(o[12]), smin);
      EXPECT_EQ(o[13], and_all);
      EXPECT_EQ(o[14], or_all);
      EXPECT_EQ(o[15], x);
    }
  }
}

// Even and odd lanes diverge and each half runs its own collectives with its own mask.
__global__ void divergent_halves(const unsigned* values, unsigned* out) {
  const unsigned tid = threadIdx.x;
  const unsigned lane = tid % 32;
  const unsigned v = values[tid];
  if (lane % 2 == 0) {
    const unsigned mask = 0x55555555u;
    out[tid * 3 + 0] = __ballot_sync(mask, v % 2 == 0);
    out[tid * 3 + 1] = __shfl_sync(mask, v, (lane + 2) % 32);
    out[tid * 3 + 2] = __reduce_add_sync(mask, 1u);
  } else {
    const unsigned mask = 0xaaaaaaaau;
    out[tid * 3 + 0] = __ballot_sync(mask, v % 2 == 1);
    out[tid * 3 + 1] = __shfl_sync(mask, v, 1);
    out[tid * 3 + 2] = __reduce_add_sync(mask, lane);
  }
}

TEST(ConformanceWarp, PartialMasksInDivergentBranches) {
  auto values = gpm::test::random_values<unsigned>(64, 12, 0, 1000);
  auto d_values = gpm::test::to_device(values);
  gpm::device_buffer<unsigned> d_out(64 * 3);
  gpm::launch(divergent_halves, 1, 64, 0, nullptr, d_values.data(), d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (unsigned w = 0; w < 2; ++w) {
    const unsigned* v = &values[w * 32];
    unsigned even_ballot = 0, odd_ballot = 0, odd_lane_sum = 0;
    for (unsigned l = 0; l < 32; ++l) {
      if (l % 2 == 0) even_ballot |= (v[l] % 2 == 0 ? 1u : 0u) << l;
      if (l % 2 == 1) odd_ballot |= (v[l] % 2 == 1 ? 1u : 0u) << l, odd_lane_sum += l;
    }
    for (unsigned l = 0; l < 32; ++l) {
      const unsigned* o = &out[(w * 32 + l) * 3];
      if (l % 2 == 0) {
        EXPECT_EQ(o[0], even_ballot);
        EXPECT_EQ(o[1], v[(l + 2) % 32]);
        EXPECT_EQ(o[2], 16u);
      } else {
        EXPECT_EQ(o[0], odd_ballot);
        EXPECT_EQ(o[1], v[1]);
        EXPECT_EQ(o[2], odd_lane_sum);
      }
    }
  }
}

// A block of 48 threads: its second warp has 16 lanes, named exactly by their mask.
__global__ void partial_last_warp(unsigned* out) {
  const unsigned tid = threadIdx.x;
  const unsigned lanes_in_warp = min(32u, blockDim.x - (tid / 32) * 32);
  const unsigned mask = lanes_in_warp == 32 ? kFull : ((1u << lanes_in_warp) - 1u);
  out[tid * 3 + 0] = __ballot_sync(mask, 1);
  out[tid * 3 + 1] = __shfl_down_sync(mask, tid, 1, 16);
  out[tid * 3 + 2] = __reduce_add_sync(mask, tid);
}

TEST(ConformanceWarp, PartialLastWarp) {
  gpm::device_buffer<unsigned> d_out(48 * 3);
  gpm::launch(partial_last_warp, 1, 48, 0, nullptr, d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (unsigned t = 0; t < 48; ++t) {
    const bool second = t >= 32;
    EXPECT_EQ(out[t * 3 + 0], second ? 0xffffu : kFull);
    const unsigned seg_end = (t / 16 + 1) * 16;
    EXPECT_EQ(out[t * 3 + 1], t + 1 < seg_end ? t + 1 : t);
    unsigned sum = 0;
    for (unsigned o = second ? 32 : 0; o < (second ? 48u : 32u); ++o) sum += o;
    EXPECT_EQ(out[t * 3 + 2], sum);
  }
}

// __activemask in converged code names every lane; inside a branch taken by lanes 0-9 only
// those lanes are active.
__global__ void active_masks(unsigned* out) {
  const unsigned lane = threadIdx.x % 32;
  __syncwarp();
  out[threadIdx.x * 2] = __activemask();
  unsigned inner = 0;
  if (lane < 10) inner = __activemask();
  out[threadIdx.x * 2 + 1] = inner;
}

TEST(ConformanceWarp, ActiveMask) {
  gpm::device_buffer<unsigned> d_out(64 * 2);
  gpm::launch(active_masks, 1, 64, 0, nullptr, d_out.data());
  auto out = gpm::test::to_host(d_out);
  for (unsigned t = 0; t < 64; ++t) {
    EXPECT_EQ(out[t * 2], kFull) << t;
    EXPECT_EQ(out[t * 2 + 1], t % 32 < 10 ? 0x3ffu : 0u) << t;
  }
}

// Warp-aggregated atomic increment: the lanes active together elect a leader that adds for all.
__global__ void aggregated_increment(unsigned* counter, unsigned* slots) {
  if (threadIdx.x % 3 == 0) return;  // leave some lanes out
  const unsigned mask = __activemask();
  const unsigned lane = threadIdx.x % 32;
  const int leader = __ffs(static_cast<int>(mask)) - 1;
  unsigned base = 0;
  if (static_cast<int>(lane) == leader)
    base = atomicAdd(counter, static_cast<unsigned>(__popc(mask)));
  base = __shfl_sync(mask, base, leader);
  const unsigned rank = static_cast<unsigned>(__popc(mask & ((1u << lane) - 1u)));
  slots[base + rank] = blockIdx.x * blockDim.x + threadIdx.x;
}

TEST(ConformanceWarp, WarpAggregatedAtomicsGiveEveryThreadOneSlot) {
  const int blocks = 8, threads = 96;
  int participants = 0;
  for (int t = 0; t < threads; ++t) participants += t % 3 != 0;
  participants *= blocks;
  gpm::device_buffer<unsigned> d_counter(1), d_slots(participants);
  d_counter.fill_bytes(0);
  d_slots.fill_bytes(0xff);
  gpm::launch(aggregated_increment, blocks, threads, 0, nullptr, d_counter.data(), d_slots.data());
  EXPECT_EQ(gpm::test::to_host(d_counter)[0], static_cast<unsigned>(participants));
  auto slots = gpm::test::to_host(d_slots);
  std::vector<int> seen(blocks * threads, 0);
  for (unsigned s : slots) {
    ASSERT_LT(s, static_cast<unsigned>(blocks * threads));
    ASSERT_NE(s % threads % 3, 0u);
    ++seen[s];
  }
  for (int t = 0; t < blocks * threads; ++t) EXPECT_EQ(seen[t], (t % threads) % 3 != 0 ? 1 : 0);
}

__global__ void bit_ops(const unsigned* in, unsigned* out) {
  const unsigned v = in[threadIdx.x];
  const unsigned long long w = (static_cast<unsigned long long>(v) << 29) ^ v;
  unsigned* o = out + threadIdx.x * 8;
  o[0] = static_cast<unsigned>(__popc(v));
  o[1] = static_cast<unsigned>(__popcll(w));
  o[2] = static_cast<unsigned>(__ffs(static_cast<int>(v)));
  o[3] = static_cast<unsigned>(__ffsll(static_cast<long long>(w)));
  o[4] = static_cast<unsigned>(__clz(static_cast<int>(v)));
  o[5] = static_cast<unsigned>(__clzll(static_cast<long long>(w)));
  o[6] = __brev(v);
  o[7] = static_cast<unsigned>(__brevll(w) >> 17);
}

TEST(ConformanceWarp, BitIntrinsics) {
  auto in = gpm::test::random_values<unsigned>(64, 13, 0, ~0u);
  in[0] = 0;
  in[1] = 1;
  in[2] = 0x80000000u;
  auto d_in = gpm::test::to_device(in);
  gpm::device_buffer<unsigned> d_out(64 * 8);
  gpm::launch(bit_ops, 1, 64, 0, nullptr, d_in.data(), d_out.data());
  auto out = gpm::test::to_host(d_out);
  auto brev64 = [](unsigned long long x) {
    unsigned long long r = 0;
    for (int i = 0; i < 64; ++i) r |= ((x >> i) & 1ull) << (63 - i);
    return r;
  };
  for (int t = 0; t < 64; ++t) {
    const unsigned v = in[t];
    const unsigned long long w = (static_cast<unsigned long long>(v) << 29) ^ v;
    const unsigned* o = &out[t * 8];
    EXPECT_EQ(o[0], static_cast<unsigned>(__builtin_popcount(v)));
    EXPECT_EQ(o[1], static_cast<unsigned>(__builtin_popcountll(w)));
    EXPECT_EQ(o[2], static_cast<unsigned>(__builtin_ffs(static_cast<int>(v))));
    EXPECT_EQ(o[3], static_cast<unsigned>(__builtin_ffsll(static_cast<long long>(w))));
    EXPECT_EQ(o[4], v == 0 ? 32u : static_cast<unsigned>(__builtin_clz(v)));
    EXPECT_EQ(o[5], w == 0 ? 64u : static_cast<unsigned>(__builtin_clzll(w)));
    EXPECT_EQ(o[6], static_cast<unsigned>(brev64(v) >> 32));
    EXPECT_EQ(o[7], static_cast<unsigned>(brev64(w) >> 17));
  }
}

}  // namespace
