// Host emulator: schedules. The default schedule is deterministic; a seed makes the scheduler
// interleave threads at atomics and fences at random, reproducibly, which exposes races that the
// default order hides.
#include <gpm/platform/emulator.hpp>
#include <gpm/platform/kernel.cuh>

#include <vector>

#include "gpm_test.hpp"

namespace {

// Restores the emulator's options after each test.
class EmuSchedule : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = gpm::emu::current_options(); }
  void TearDown() override { gpm::emu::set_options(saved_); }

  void use(unsigned workers, std::uint64_t seed) {
    gpm::emu::options o = saved_;
    o.workers = workers;
    o.seed = seed;
    gpm::emu::set_options(o);
  }

  gpm::emu::options saved_;
};

constexpr int kThreads = 256;
constexpr int kSteps = 4;

// Each thread takes kSteps tickets; the ticket order is the interleaving.
__global__ void take_tickets(unsigned* ticket, unsigned* order) {
  for (int s = 0; s < kSteps; ++s) {
    const unsigned t = atomicAdd(ticket, 1u);
    order[t] = threadIdx.x;
  }
}

std::vector<unsigned> interleaving() {
  gpm::device_buffer<unsigned> ticket(1), order(kThreads * kSteps);
  ticket.fill_bytes(0);
  gpm::launch(take_tickets, 1, kThreads, 0, nullptr, ticket.data(), order.data());
  return gpm::test::to_host(order);
}

TEST_F(EmuSchedule, DefaultScheduleRunsThreadsInOrder) {
  use(0, 0);
  const auto order = interleaving();
  for (int i = 0; i < kThreads * kSteps; ++i)
    ASSERT_EQ(order[i], static_cast<unsigned>(i / kSteps));
  EXPECT_EQ(interleaving(), order);
}

TEST_F(EmuSchedule, SeedGivesReproducibleInterleavings) {
  use(1, 1234);
  const auto a = interleaving();
  use(1, 1234);
  const auto b = interleaving();
  EXPECT_EQ(a, b) << "the same seed must give the same schedule";
  use(1, 99);
  const auto c = interleaving();
  EXPECT_NE(a, c) << "another seed should give another schedule";
  bool interleaved = false;
  for (int i = 0; i + 1 < kThreads * kSteps; ++i) interleaved |= a[i] > a[i + 1];
  EXPECT_TRUE(interleaved) << "a seeded schedule must interleave threads";
}

// A lost-update race: read, fence, write back. Correct only if nothing runs between the read and
// the write, which is what the default schedule happens to do.
__global__ void racy_increment(int* counter) {
  const int v = *counter;
  __threadfence();
  *counter = v + 1;
}

int racy_total(int threads) {
  gpm::device_buffer<int> c(1);
  c.fill_bytes(0);
  gpm::launch(racy_increment, 1, threads, 0, nullptr, c.data());
  return gpm::test::to_host(c)[0];
}

TEST_F(EmuSchedule, SeededYieldsExposeRaces) {
  use(1, 0);
  EXPECT_EQ(racy_total(512), 512);
  int lost = 0;
  for (std::uint64_t seed = 1; seed <= 3; ++seed) {
    use(1, seed);
    lost += 512 - racy_total(512);
  }
  EXPECT_GT(lost, 0) << "yields at fences should have interleaved the read and the write";
}

// Threads spin-wait on each other inside one block: thread i waits for thread i+1's flag, so the
// default order (0 first) can only finish if a spinning thread lets the others run.
__global__ void chain_of_waits(int* flags, int n) {
  const int i = threadIdx.x;
  if (i + 1 < n) {
    gpm::atomic_ref<int, gpm::thread_scope::block> next(flags[i + 1]);
    while (next.load(gpm::memory_order_acquire) == 0) {
    }
  }
  gpm::atomic_ref<int, gpm::thread_scope::block>(flags[i]).store(1, gpm::memory_order_release);
}

TEST_F(EmuSchedule, SpinningThreadsLetOthersRun) {
  for (std::uint64_t seed : {0ull, 7ull}) {
    use(1, seed);
    gpm::device_buffer<int> flags(200);
    flags.fill_bytes(0);
    gpm::launch(chain_of_waits, 1, 200, 0, nullptr, flags.data(), 200);
    for (int f : gpm::test::to_host(flags)) ASSERT_EQ(f, 1) << "seed " << seed;
  }
}

TEST_F(EmuSchedule, OptionsRoundTrip) {
  gpm::emu::options o = saved_;
  o.workers = 3;
  o.seed = 42;
  o.yield_every = 2;
  gpm::emu::set_options(o);
  const gpm::emu::options now = gpm::emu::current_options();
  EXPECT_EQ(now.workers, 3u);
  EXPECT_EQ(now.seed, 42u);
  EXPECT_EQ(now.yield_every, 2u);
  cudaDeviceProp p{};
  ASSERT_EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
  EXPECT_EQ(p.multiProcessorCount, 3);
  EXPECT_NE(std::string(p.name).find("emulator"), std::string::npos);
}

}  // namespace
