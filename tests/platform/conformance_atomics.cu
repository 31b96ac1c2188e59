// Conformance, atomics and fences: every atomicXxx family under contention with exact results,
// block- and system-scope variants, gpm::atomic_ref in each scope, a spin lock, and message
// passing through fences within and across blocks. Same expectations on both backends.
#include <gpm/platform/kernel.cuh>

#include <algorithm>
#include <numeric>

#include "gpm_test.hpp"

namespace {

constexpr int kBlocks = 48;
constexpr int kThreads = 256;
constexpr int kTotal = kBlocks * kThreads;
constexpr int kRepeat = 8;

struct counters {
  int i;
  unsigned u;
  unsigned long long ull;
  float f;
  double d;
  int sub;
  int imin;
  int imax;
  unsigned long long umax;
  long long llmin;
  unsigned long long bits_or;
  unsigned long long bits_xor;
  unsigned bits_and;
};

__global__ void contended(counters* c, const int* values) {
  const int gid = blockIdx.x * blockDim.x + threadIdx.x;
  for (int r = 0; r < kRepeat; ++r) {
    atomicAdd(&c->i, 1);
    atomicAdd(&c->u, 2u);
    atomicAdd(&c->ull, 3ull);
    atomicAdd(&c->f, 1.0f);
    atomicAdd(&c->d, 0.5);
    atomicSub(&c->sub, 1);
  }
  const int v = values[gid];
  atomicMin(&c->imin, v);
  atomicMax(&c->imax, v);
  atomicMax(&c->umax, static_cast<unsigned long long>(v) * 1000003ull);
  atomicMin(&c->llmin, -static_cast<long long>(v) * (1ll << 33));
  atomicOr(&c->bits_or, 1ull << (gid % 64));
  atomicXor(&c->bits_xor, 1ull << (gid % 64));
  atomicAnd(&c->bits_and, ~(1u << (gid % 31)));
}

TEST(ConformanceAtomics, ContendedArithmeticIsExact) {
  auto values = gpm::test::random_values<int>(kTotal, 30, -1000000, 1000000);
  values[777] = 1000000;
  auto d_values = gpm::test::to_device(values);
  counters init{};
  init.imin = INT32_MAX;
  init.imax = INT32_MIN;
  init.llmin = INT64_MAX;
  init.bits_and = ~0u;
  gpm::device_buffer<counters> d_c(1);
  d_c.copy_from_host(&init, 1);
  gpm::launch(contended, kBlocks, kThreads, 0, nullptr, d_c.data(), d_values.data());
  counters c{};
  d_c.copy_to_host(&c, 1);
  EXPECT_EQ(c.i, kTotal * kRepeat);
  EXPECT_EQ(c.u, 2u * kTotal * kRepeat);
  EXPECT_EQ(c.ull, 3ull * kTotal * kRepeat);
  EXPECT_EQ(c.f, static_cast<float>(kTotal * kRepeat));  // integers below 2^24 are exact
  EXPECT_EQ(c.d, 0.5 * kTotal * kRepeat);
  EXPECT_EQ(c.sub, -kTotal * kRepeat);
  EXPECT_EQ(c.imin, *std::min_element(values.begin(), values.end()));
  EXPECT_EQ(c.imax, 1000000);
  unsigned long long umax = 0;
  for (int v : values) umax = std::max(umax, static_cast<unsigned long long>(v) * 1000003ull);
  EXPECT_EQ(c.umax, umax);
  EXPECT_EQ(c.llmin, -1000000ll * (1ll << 33));
  EXPECT_EQ(c.bits_or, ~0ull);
  EXPECT_EQ(c.bits_xor, 0ull);  // kTotal is a multiple of 128: every bit flipped an even count
  EXPECT_EQ(c.bits_and, 0x80000000u);
}

__global__ void exchange_all(unsigned* slot, unsigned* got) {
  const unsigned gid = blockIdx.x * blockDim.x + threadIdx.x;
  got[gid] = atomicExch(slot, gid + 1);
}

TEST(ConformanceAtomics, ExchangeHandsEachValueOnExactlyOnce) {
  gpm::device_buffer<unsigned> d_slot(1), d_got(kTotal);
  d_slot.fill_bytes(0);
  gpm::launch(exchange_all, kBlocks, kThreads, 0, nullptr, d_slot.data(), d_got.data());
  auto got = gpm::test::to_host(d_got);
  got.push_back(gpm::test::to_host(d_slot)[0]);
  std::sort(got.begin(), got.end());
  for (unsigned i = 0; i <= kTotal; ++i) ASSERT_EQ(got[i], i);
}

__global__ void wrap_counters(unsigned* inc, unsigned* dec, unsigned* inc_seen) {
  const unsigned old = atomicInc(inc, 9u);
  atomicAdd(&inc_seen[old], 1u);
  atomicDec(dec, 9u);
}

TEST(ConformanceAtomics, IncDecWrap) {
  const int n = 1000;
  gpm::device_buffer<unsigned> d_inc(1), d_dec(1), d_seen(10);
  d_inc.fill_bytes(0);
  d_dec.fill_bytes(0);
  d_seen.fill_bytes(0);
  gpm::launch(wrap_counters, n / 100, 100, 0, nullptr, d_inc.data(), d_dec.data(), d_seen.data());
  EXPECT_EQ(gpm::test::to_host(d_inc)[0], static_cast<unsigned>(n % 10));
  // atomicDec from 0 wraps to 9, then counts down: after n steps it is (10 - n % 10) % 10.
  EXPECT_EQ(gpm::test::to_host(d_dec)[0], static_cast<unsigned>((10 - n % 10) % 10));
  for (unsigned s : gpm::test::to_host(d_seen)) EXPECT_EQ(s, static_cast<unsigned>(n / 10));
}

// Every thread takes a global spin lock (CAS), updates a plain counter, and releases it.
__global__ void locked_increment(int* lock, int* counter) {
  while (atomicCAS(lock, 0, 1) != 0) {
  }
  __threadfence();
  volatile int* c = counter;
  *c = *c + 1;
  __threadfence();
  atomicExch(lock, 0);
}

TEST(ConformanceAtomics, CompareAndSwapSpinLock) {
  gpm::device_buffer<int> d_lock(1), d_counter(1);
  d_lock.fill_bytes(0);
  d_counter.fill_bytes(0);
  gpm::launch(locked_increment, 16, 64, 0, nullptr, d_lock.data(), d_counter.data());
  EXPECT_EQ(gpm::test::to_host(d_counter)[0], 16 * 64);
  EXPECT_EQ(gpm::test::to_host(d_lock)[0], 0);
}

__global__ void scoped_variants(unsigned* global_count, unsigned* system_count,
                                unsigned* per_block) {
  __shared__ unsigned block_count;
  if (threadIdx.x == 0) block_count = 0;
  __syncthreads();
  atomicAdd_block(&block_count, 1u);
  atomicAdd_system(system_count, 1u);
  atomicAdd(global_count, 1u);
  __syncthreads();
  if (threadIdx.x == 0) per_block[blockIdx.x] = block_count;
}

TEST(ConformanceAtomics, BlockAndSystemScopes) {
  unsigned* host_count = nullptr;
  gpm::check_cuda(cudaHostAlloc(&host_count, sizeof(unsigned), cudaHostAllocMapped),
                  "cudaHostAlloc");
  *host_count = 0;
  unsigned* dev_view = nullptr;
  gpm::check_cuda(cudaHostGetDevicePointer(&dev_view, host_count, 0), "cudaHostGetDevicePointer");
  gpm::device_buffer<unsigned> d_global(1), d_per_block(kBlocks);
  d_global.fill_bytes(0);
  gpm::launch(scoped_variants, kBlocks, kThreads, 0, nullptr, d_global.data(), dev_view,
              d_per_block.data());
  gpm::test::sync_ok();
  EXPECT_EQ(*host_count, static_cast<unsigned>(kTotal));  // read by the CPU, no copy
  EXPECT_EQ(gpm::test::to_host(d_global)[0], static_cast<unsigned>(kTotal));
  for (unsigned b : gpm::test::to_host(d_per_block)) EXPECT_EQ(b, static_cast<unsigned>(kThreads));
  cudaFreeHost(host_count);
}

template <gpm::thread_scope S>
__global__ void atomic_ref_ops(unsigned long long* words) {
  gpm::atomic_ref<unsigned long long, S> sum(words[0]);
  gpm::atomic_ref<unsigned long long, S> lo(words[1]);
  gpm::atomic_ref<unsigned long long, S> hi(words[2]);
  gpm::atomic_ref<unsigned long long, S> claimed(words[3]);
  const unsigned long long id = blockIdx.x * blockDim.x + threadIdx.x;
  sum.fetch_add(id, gpm::memory_order_relaxed);
  lo.fetch_min(id + 5);
  hi.fetch_max(id * 2);
  unsigned long long expected = 0;
  claimed.compare_exchange_strong(expected, id + 1);  // exactly one thread wins
  words[4 + id] = sum.load(gpm::memory_order_acquire) != 0 ? 1 : 0;
}

template <class T>
class ConformanceAtomicRef : public ::testing::Test {};
template <gpm::thread_scope S>
struct scope_tag {
  static constexpr gpm::thread_scope value = S;
};
using Scopes =
    ::testing::Types<scope_tag<gpm::thread_scope::block>, scope_tag<gpm::thread_scope::device>,
                     scope_tag<gpm::thread_scope::system>>;
TYPED_TEST_SUITE(ConformanceAtomicRef, Scopes);

TYPED_TEST(ConformanceAtomicRef, FetchOpsAndCompareExchange) {
  const int blocks = 8, threads = 128, n = blocks * threads;
  std::vector<unsigned long long> init(4 + n, 0);
  init[1] = ~0ull;
  auto d_words = gpm::test::to_device(init);
  if (TypeParam::value == gpm::thread_scope::block) {
    // Block scope is only coherent within a block: one block does all the work.
    gpm::launch(atomic_ref_ops<TypeParam::value>, 1, threads, 0, nullptr, d_words.data());
    auto w = gpm::test::to_host(d_words);
    EXPECT_EQ(w[0], static_cast<unsigned long long>(threads) * (threads - 1) / 2);
    EXPECT_EQ(w[1], 5ull);
    EXPECT_EQ(w[2], 2ull * (threads - 1));
    EXPECT_GE(w[3], 1ull);
    EXPECT_LE(w[3], static_cast<unsigned long long>(threads));
    return;
  }
  gpm::launch(atomic_ref_ops<TypeParam::value>, blocks, threads, 0, nullptr, d_words.data());
  auto w = gpm::test::to_host(d_words);
  EXPECT_EQ(w[0], static_cast<unsigned long long>(n) * (n - 1) / 2);
  EXPECT_EQ(w[1], 5ull);
  EXPECT_EQ(w[2], 2ull * (n - 1));
  EXPECT_GE(w[3], 1ull);
  EXPECT_LE(w[3], static_cast<unsigned long long>(n));
}

// Message passing: a producer writes data, fences, then publishes a flag; a consumer that sees
// the flag must see the data. Within a block (two warps) and across blocks (block 0 produces and
// never waits, so the pattern is safe however blocks are scheduled).
constexpr int kMessage = 1024;

__global__ void message_passing(int* data, int* flag, int* seen) {
  const bool producer = blockIdx.x == 0 ? threadIdx.x == 0 : threadIdx.x == 32;
  const bool consumer = blockIdx.x == 1 ? threadIdx.x == 0 : threadIdx.x == 33;
  int* block_flag = flag + blockIdx.x;
  int* block_data = data + blockIdx.x * kMessage;
  if (blockIdx.x == 1 && consumer) {
    // Cross-block: wait for block 0's flag.
    gpm::atomic_ref<int, gpm::thread_scope::device> f(flag[0]);
    while (f.load(gpm::memory_order_acquire) == 0) {
    }
    int ok = 1;
    for (int i = 0; i < kMessage; ++i) ok &= data[i] == i * 7 + 1;
    seen[2] = ok;
  }
  if (producer) {
    for (int i = 0; i < kMessage; ++i) block_data[i] = i * 7 + 1;
    __threadfence();
    gpm::atomic_ref<int, gpm::thread_scope::device>(*block_flag)
        .store(1, gpm::memory_order_release);
  }
  if (blockIdx.x == 0 && consumer) {
    gpm::atomic_ref<int, gpm::thread_scope::device> f(*block_flag);
    while (f.load(gpm::memory_order_acquire) == 0) {
    }
    int ok = 1;
    for (int i = 0; i < kMessage; ++i) ok &= block_data[i] == i * 7 + 1;
    seen[0] = ok;
  }
}

TEST(ConformanceAtomics, FencedMessagePassing) {
  gpm::device_buffer<int> d_data(2 * kMessage), d_flag(2), d_seen(3);
  d_data.fill_bytes(0);
  d_flag.fill_bytes(0);
  d_seen.fill_bytes(0);
  gpm::launch(message_passing, 2, 64, 0, nullptr, d_data.data(), d_flag.data(), d_seen.data());
  auto seen = gpm::test::to_host(d_seen);
  EXPECT_EQ(seen[0], 1) << "within a block";
  EXPECT_EQ(seen[2], 1) << "across blocks";
}

}  // namespace
