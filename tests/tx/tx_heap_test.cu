// Unit tests of gpm::tx_heap and gpm::tx_ref: creating and opening (every error), store and load,
// launch shapes (every error), every tx_status a transaction can end with, the transaction's
// operations (read-your-writes, typed and 64-bit access, cancel, ok), the persistence modes and
// their names, durable_seq / sync / stats, kernels launched by the caller through heap.ref(),
// the adaptive mode's per-launch choice and options, HCL-striped records as they lie in the log,
// and the threshold calibration (tx_calibrate).
#include <gpm/pool/pool.hpp>
#include <gpm/tx/tx_heap.cuh>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "tx_test_support.hpp"

namespace {

using gpm::tx_mode;
using gpm::tx_status;
using gpm::test::tx::with_schedule;

constexpr gpm::tx_geometry kGeometry{.words = 256, .logs = 4, .log_bytes = 4096};

gpm::tx_options small_options(tx_mode mode = tx_mode::helpers) {
  gpm::tx_options o;
  o.mode = mode;
  o.max_threads = 4096;
  o.ring_chunks = 64;
  o.switch_threshold = 0;  // adaptive: helpers on as soon as anything persists
  o.slice_us = 1;
  return o;
}

template <class E>
void expect_error(gpm::errc code, E&& call) {
  try {
    call();
    ADD_FAILURE() << "no gpm::error thrown, expected " << gpm::to_string(code);
  } catch (const gpm::error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_GT(std::strlen(e.what()), 30u) << "the message should say what to do";
  }
}

// One transaction per launched thread: body(t, worker index); results copied back.
struct results {
  std::vector<gpm::tx_result> r;
  const gpm::tx_result& operator[](std::size_t i) const { return r[i]; }
};
template <unsigned L = 32, unsigned W = 16, class Body>
results run_each(gpm::tx_heap& heap, std::uint32_t blocks, std::uint32_t workers, Body body) {
  gpm::device_buffer<gpm::tx_result> out(std::size_t{blocks} * workers);
  gpm::tx_result* d = out.data();
  heap.launch(blocks, workers, [=] __device__(gpm::tx_ref tx) {
    d[tx.worker_index()] = tx.run<L, W>([&](auto& t) { body(t, tx.worker_index()); });
  });
  heap.sync();
  return {gpm::test::to_host(out)};
}

std::vector<std::uint32_t> contents(const gpm::tx_heap& heap) {
  std::vector<std::uint32_t> w(heap.geometry().words);
  heap.load(0, w.data(), w.size());
  return w;
}

// ---- transaction bodies ------------------------------------------------------------------------
// At namespace scope: nvcc allows no extended __device__ lambda inside a test's (private) body.

struct no_work {
  __device__ void operator()(gpm::tx_ref) const {}
};

// Thread i writes i into word i modulo the heap.
struct write_own_number {
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t i) const {
    t.write(i % t.words(), static_cast<std::uint32_t>(i));
  }
};

// Even threads write i + 1 into word i; odd ones write nothing.
struct write_if_even {
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t i) const {
    if (i % 2 == 0) t.write(i, static_cast<std::uint32_t>(i + 1));
  }
};

// Thread i writes word i first, then threads 0..5 fail each in their own way.
struct fail_in_own_way {
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t i) const {
    t.write(i, 7);
    switch (i) {
      case 0: t.cancel(); break;
      case 1: t.read(t.words()); break;
      case 2: t.write(t.words() + 5, 1); break;
      case 3: t.template read_as<std::uint64_t>(t.words() - 1); break;
      case 4: t.write(100, 1), t.write(101, 1); break;  // three words: the write set holds 2
      case 5: t.read(100), t.read(101), t.read(102), t.read(103); break;  // five orecs of 4
      default: break;
    }
  }
};

// Threads below `threads` write `first` words (thread 0) or `others` words (the rest), from
// word spacing * (i % 4).
struct write_run {
  std::uint64_t threads, first, others, spacing;
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t i) const {
    if (i >= threads) return;
    for (std::uint64_t k = 0; k < (i == 0 ? first : others); ++k) t.write(spacing * (i % 4) + k, 3);
  }
};

struct increment_word0 {
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t) const {
    t.write(0, t.read(0) + 1);
  }
};

struct triple {
  std::uint32_t a, b, c;
};

// Thread 0 writes and reads back words, 64-bit values, a double and a 3-word struct, noting in
// `seen` what it read.
struct typed_access {
  std::uint32_t* seen;
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t i) const {
    if (i != 0) return;
    t.write(3, 10);
    seen[0] = t.read(3);  // its own write
    t.write(3, 11);       // a second write of one word keeps one entry
    seen[1] = t.read(3);
    t.template write_as<std::uint64_t>(10, 0x0123456789abcdefull);
    seen[2] = t.read(10);  // the low word
    seen[3] = t.read(11);
    t.template write_as<double>(20, 2.5);
    t.template write_as<triple>(30, triple{7, 8, 9});
    seen[4] = t.template read_as<triple>(30).c;
    seen[5] = t.ok();
  }
};

// Threads 0 and 1 note ok() before and after dooming their attempt (cancel, a bad index).
struct doom_then_write {
  std::uint32_t* seen;
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t i) const {
    if (i >= 2) return;
    seen[2 * i] = t.ok();
    if (i == 0) t.cancel();
    if (i == 1) t.read(1 << 20);
    seen[2 * i + 1] = t.ok() ? 1 : 2;
    t.write(i, 5);  // ignored
  }
};

struct add_three_to_u64 {
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t) const {
    t.template write_as<std::uint64_t>(0, t.template read_as<std::uint64_t>(0) + 3);
  }
};

struct write_nine {
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t i) const {
    t.write(i, 9);
  }
};

// Adds i to word i % 200 and counts in word 255.
struct add_and_count {
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t i) const {
    t.write(i % 200, t.read(i % 200) + static_cast<std::uint32_t>(i));
    t.write(255, t.read(255) + 1);
  }
};

// 256 add_and_count transactions, their records left in the logs (no sync()).
void launch_add_and_count(gpm::tx_heap& heap) {
  heap.launch(4, 64, [] __device__(gpm::tx_ref tx) {
    tx.run([&](auto& t) { add_and_count{}(t, tx.worker_index()); });
  });
  gpm::check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

// The heap after `launches` launches of 256 add_and_count transactions (i = 0..255) each.
void expect_add_and_count(const gpm::tx_heap& heap, std::uint32_t launches,
                          const std::string& what) {
  const auto w = contents(heap);
  EXPECT_EQ(w[255], 256u * launches) << what;
  std::uint64_t sum = 0;
  for (int i = 0; i < 200; ++i) sum += w[i];
  EXPECT_EQ(sum, 255u * 256 / 2 * launches) << what;
}

// Even i: moves 1 to 7 between two of the accounts in words 0..7; odd i: sums all eight into
// sums[i] (the committed attempt's sum is the last one written).
struct transfer_or_sum {
  std::uint32_t* sums;
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t i) const {
    if (i % 2 == 0) {
      const auto a = static_cast<std::uint32_t>(i / 2 % 8);
      const auto b = static_cast<std::uint32_t>((a + 1 + i / 16 % 7) % 8);
      const auto amount = static_cast<std::uint32_t>(1 + i % 7);
      t.write(a, t.read(a) - amount);
      t.write(b, t.read(b) + amount);
    } else {
      std::uint32_t sum = 0;
      for (std::uint32_t k = 0; k < 8; ++k) sum += t.read(k);
      sums[i] = sum;
    }
  }
};

// Reads words 0..7 and writes nothing.
struct read_eight {
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t) const {
    for (std::uint32_t k = 0; k < 8; ++k) t.read(k);
  }
};

// A tile of 32 lanes, each writing its own word in one transaction.
struct warp_writes_own_word {
  __device__ void operator()(gpm::tx_ref tx) const {
    const auto tile = gpm::make_tile<32>();
    tx.run(tile, [&](auto& t) {
      t.write(tx.worker_index(), static_cast<std::uint32_t>(tx.worker_index() + 1));
    });
  }
};

class TxHeap : public ::testing::Test {
 protected:
  gpm::test::scratch_pool pool{"tx-unit"};
};

// ---- create / open ----------------------------------------------------------------------------

TEST_F(TxHeap, CreatesAZeroHeapAndReopensItWithItsGeometry) {
  {
    auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, small_options());
    EXPECT_EQ(heap.geometry(), kGeometry);
    EXPECT_EQ(heap.name(), "h");
    EXPECT_EQ(heap.options().mode, tx_mode::helpers);
    EXPECT_EQ(heap.ref().words(), 256u);
    EXPECT_EQ(heap.ref().mode(), tx_mode::helpers);
    EXPECT_EQ(contents(heap), std::vector<std::uint32_t>(256, 0));
    EXPECT_EQ(heap.last_recovery().replayed, 0u);
    EXPECT_EQ(heap.durable_seq(), 0u);
  }
  gpm::pool& p = pool.reopen();
  auto again = gpm::tx_heap::open(p, "h", kGeometry, small_options(tx_mode::direct));
  // A second handle would recover the heap under the first one's reproducer: refused.
  expect_error(gpm::errc::busy, [&] { gpm::tx_heap::open(p, "h", small_options()); });
  expect_error(gpm::errc::busy, [&] { p.free("h"); });
  EXPECT_EQ(again.geometry(), kGeometry);
  EXPECT_EQ(again.options().mode, tx_mode::direct);
  const auto obj = p.get("h");
  EXPECT_EQ(obj.type_tag, gpm::detail::tx::kTypeTag);
  // A moved-from handle is empty: a clear error, never a crash; the heap lives on in the other.
  auto moved = std::move(again);
  expect_error(gpm::errc::invalid_argument, [&] { (void)again.geometry(); });  // NOLINT
  expect_error(gpm::errc::invalid_argument, [&] { (void)again.ref(); });
  expect_error(gpm::errc::invalid_argument, [&] { again.sync(); });
  expect_error(gpm::errc::invalid_argument, [&] { (void)again.stats(); });
  EXPECT_EQ(moved.geometry(), kGeometry);
  moved.sync();
}

TEST_F(TxHeap, CreateRejectsBadGeometryOptionsTakenNamesAndFullPools) {
  gpm::pool& p = pool.get();
  const auto create = [&](gpm::tx_geometry g, gpm::tx_options o = small_options()) {
    return [&p, g, o] { gpm::tx_heap::create(p, "bad", g, o); };
  };
  expect_error(gpm::errc::invalid_argument, create({.words = 0, .logs = 1}));
  expect_error(gpm::errc::invalid_argument, create({.words = (1ull << 32) + 1, .logs = 1}));
  expect_error(gpm::errc::invalid_argument, create({.words = 8, .logs = 0}));
  expect_error(gpm::errc::invalid_argument, create({.words = 8, .logs = 1, .log_bytes = 128}));
  expect_error(gpm::errc::invalid_argument, create({.words = 8, .logs = 1, .log_bytes = 1000}));
  // 4 logs of 2^62 bytes: 2^64 bytes, which wrapped around to a small object.
  expect_error(gpm::errc::invalid_argument,
               create({.words = 8, .logs = 4, .log_bytes = 1ull << 62}));
  gpm::tx_options o = small_options();
  o.helper_warps = 0;
  expect_error(gpm::errc::invalid_argument, create(kGeometry, o));
  o.helper_warps = 3;
  expect_error(gpm::errc::invalid_argument, create(kGeometry, o));
  o = small_options();
  o.ring_chunks = 1;
  expect_error(gpm::errc::invalid_argument, create(kGeometry, o));
  o.ring_chunks = 1 << 20;
  expect_error(gpm::errc::invalid_argument, create(kGeometry, o));
  o = small_options();
  o.max_threads = 0;
  expect_error(gpm::errc::invalid_argument, create(kGeometry, o));
  o = small_options();
  o.orecs = 3;
  expect_error(gpm::errc::invalid_argument, create(kGeometry, o));
  o = small_options();
  o.reads = static_cast<gpm::tx_reads>(7);
  expect_error(gpm::errc::invalid_argument, create(kGeometry, o));
  EXPECT_FALSE(p.find("bad")) << "a rejected create must not allocate";

  gpm::tx_heap::create(p, "taken", kGeometry, small_options());
  expect_error(gpm::errc::already_exists,
               [&] { gpm::tx_heap::create(p, "taken", kGeometry, small_options()); });
  expect_error(gpm::errc::out_of_memory,
               create({.words = 1ull << 30, .logs = 1}, small_options(tx_mode::direct)));
}

TEST_F(TxHeap, OpenRejectsMissingForeignCorruptAndMismatchedHeaps) {
  gpm::pool& p = pool.get();
  expect_error(gpm::errc::not_found, [&] { gpm::tx_heap::open(p, "nothing"); });
  gpm::tx_heap::create(p, "h", kGeometry, small_options());
  expect_error(gpm::errc::layout_mismatch, [&] {
    gpm::tx_heap::open(p, "h", {.words = 255, .logs = 4, .log_bytes = 4096}, small_options());
  });
  expect_error(gpm::errc::invalid_argument, [&] {
    gpm::tx_options o = small_options();
    o.helper_warps = 5;
    gpm::tx_heap::open(p, "h", o);
  });
  auto* h = p.host_ptr<gpm::detail::tx::heap_header>(p.get("h").offset);
  const gpm::detail::tx::heap_header good = *h;

  h->words = 257;  // a flipped bit in the geometry
  expect_error(gpm::errc::corrupt, [&] { gpm::tx_heap::open(p, "h", small_options()); });
  *h = good;
  h->common.major = gpm::detail::tx::kMajor + 1;
  expect_error(gpm::errc::version, [&] { gpm::tx_heap::open(p, "h", small_options()); });
  *h = good;
  h->common.major = 1;  // a 1.x heap: records with a whole slot for the seq, which 2.x cannot read
  expect_error(gpm::errc::version, [&] { gpm::tx_heap::open(p, "h", small_options()); });
  *h = good;
  std::memset(h->common.magic, 0, sizeof h->common.magic);  // creation interrupted
  expect_error(gpm::errc::corrupt, [&] { gpm::tx_heap::open(p, "h", small_options()); });
  *h = good;
  h->common.magic[0] = 'X';
  expect_error(gpm::errc::corrupt, [&] { gpm::tx_heap::open(p, "h", small_options()); });
  *h = good;
  // A crafted header, checksum and all, whose logs are 2^64 bytes longer than the object's: the
  // sizes wrap around to the object's own, and opening it used to address the logs far outside.
  h->log_chunks += (1ull << 60) / kGeometry.logs;  // 2^64 bytes / 16-byte chunks / logs
  gpm::format::seal_header(h);
  expect_error(gpm::errc::corrupt, [&] { gpm::tx_heap::open(p, "h", small_options()); });
  *h = good;

  // Both copies of the root damaged.
  auto* roots = reinterpret_cast<gpm::detail::tx::root_record*>(reinterpret_cast<char*>(h) +
                                                                gpm::detail::tx::kRootOffset);
  const gpm::detail::tx::root_record r0 = roots[0], r1 = roots[1];
  roots[0].applied_seq ^= 1;
  roots[1].applied_seq ^= 1;
  expect_error(gpm::errc::corrupt, [&] { gpm::tx_heap::open(p, "h", small_options()); });
  roots[0] = r0;
  roots[1] = r1;
  EXPECT_NO_THROW(gpm::tx_heap::open(p, "h", small_options()));

  // A valid header in an object of another size: truncated or extended.
  const std::uint64_t off = p.allocate("copy", p.get("h").bytes + 128);
  std::memcpy(p.host_ptr<char>(off), h, sizeof *h);
  expect_error(gpm::errc::corrupt, [&] { gpm::tx_heap::open(p, "copy", small_options()); });
  const std::uint64_t tiny = p.allocate("tiny", 64);
  (void)tiny;
  expect_error(gpm::errc::corrupt, [&] { gpm::tx_heap::open(p, "tiny", small_options()); });
}

// ---- store / load / launch shapes -------------------------------------------------------------

TEST_F(TxHeap, StoreIsDurableAndLoadReadsTheWorkingCopy) {
  {
    auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, small_options());
    std::vector<std::uint32_t> v(100);
    std::iota(v.begin(), v.end(), 1000);
    heap.store(50, v.data(), v.size());
    heap.store(0, v.data(), 0);
    std::vector<std::uint32_t> back(100);
    heap.load(50, back.data(), back.size());
    EXPECT_EQ(back, v);
    expect_error(gpm::errc::invalid_argument, [&] { heap.store(200, v.data(), 57); });
    expect_error(gpm::errc::invalid_argument, [&] { heap.load(257, back.data(), 0); });
    expect_error(gpm::errc::invalid_argument, [&] { heap.load(0, back.data(), 257); });
    expect_error(gpm::errc::invalid_argument, [&] { heap.store(0, nullptr, 4); });
    expect_error(gpm::errc::invalid_argument, [&] { heap.load(0, nullptr, 4); });
    heap.load(0, nullptr, 0);  // nothing asked
  }
  auto again = gpm::tx_heap::open(pool.reopen(), "h", small_options());
  const auto w = contents(again);
  EXPECT_EQ(w[49], 0u);
  EXPECT_EQ(w[50], 1000u);
  EXPECT_EQ(w[149], 1099u);
}

TEST_F(TxHeap, LaunchRejectsShapesItCannotRun) {
  auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, small_options());
  const no_work body{};
  expect_error(gpm::errc::invalid_argument, [&] { heap.launch(0, 32, body); });
  expect_error(gpm::errc::invalid_argument, [&] { heap.launch(1, 0, body); });
  expect_error(gpm::errc::invalid_argument, [&] { heap.launch(1, 48, body); });
  expect_error(gpm::errc::invalid_argument, [&] { heap.launch(1, 1024, body); });  // + helpers
  expect_error(gpm::errc::invalid_argument, [&] { heap.launch(5, 32, body); });    // 4 logs
  expect_error(gpm::errc::invalid_argument, [&] { heap.launch(4, 2048, body); });
  EXPECT_NO_THROW(heap.launch(4, 992, body));  // 992 workers and one helper warp: 1024
  heap.sync();
  gpm::tx_options few = small_options(tx_mode::direct);
  few.max_threads = 256;
  auto direct = gpm::tx_heap::create(pool.get(), "d", kGeometry, few);
  expect_error(gpm::errc::invalid_argument, [&] { direct.launch(9, 32, body); });
  // Without helpers, blocks share logs: 8 blocks on 4 logs.
  const auto r = run_each(direct, 8, 32, write_own_number{});
  for (const auto& x : r.r) EXPECT_EQ(x.status, tx_status::committed);
  EXPECT_EQ(direct.durable_seq(), 256u);
}

// ---- statuses ---------------------------------------------------------------------------------

TEST_F(TxHeap, EveryStatusHasAName) {
  for (int s = 0; s < gpm::tx_status_count; ++s) {
    EXPECT_NE(gpm::to_string(static_cast<tx_status>(s)), "unknown") << s;
  }
  EXPECT_EQ(gpm::to_string(tx_status::write_set_full), "write_set_full");
  EXPECT_EQ(gpm::to_string(static_cast<tx_status>(99)), "unknown");
}

// The benchmarks' record names, both ways.
TEST_F(TxHeap, ModesHaveTheBenchmarksNamesAndParseBack) {
  const std::pair<tx_mode, const char*> names[] = {
      {tx_mode::volatile_only, "volatile"}, {tx_mode::direct, "redo-direct"},
      {tx_mode::helpers, "helpers"},        {tx_mode::adaptive, "adaptive"},
      {tx_mode::hcl, "redo-hcl"},           {tx_mode::undo, "undo-hcl"}};
  for (const auto& [mode, name] : names) {
    EXPECT_EQ(gpm::to_string(mode), name);
    EXPECT_EQ(gpm::parse_tx_mode(name), mode) << name;
  }
  EXPECT_EQ(gpm::to_string(static_cast<tx_mode>(99)), "unknown");
  EXPECT_EQ(gpm::parse_tx_mode("direct"), std::nullopt);
  EXPECT_EQ(gpm::parse_tx_mode(""), std::nullopt);
}

TEST_F(TxHeap, CommitsGetConsecutiveSequenceNumbersAndEmptyOnesNone) {
  auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, small_options());
  const auto r = run_each(heap, 2, 64, write_if_even{});
  std::vector<bool> seen(65, false);
  for (std::uint64_t i = 0; i < 128; ++i) {
    EXPECT_EQ(r[i].status, tx_status::committed);
    EXPECT_EQ(r[i].attempts, 1u);
    if (i % 2 == 1) {
      EXPECT_EQ(r[i].seq, 0u);
      continue;
    }
    ASSERT_GE(r[i].seq, 1u);
    ASSERT_LE(r[i].seq, 64u);
    EXPECT_FALSE(seen[r[i].seq]) << "seq " << r[i].seq << " twice";
    seen[r[i].seq] = true;
  }
  EXPECT_EQ(heap.durable_seq(), 64u);
  const auto w = contents(heap);
  for (std::uint64_t i = 0; i < 128; ++i) EXPECT_EQ(w[i], i % 2 == 0 ? i + 1 : 0) << i;
}

TEST_F(TxHeap, FailedTransactionsReportTheirStatusAndWriteNothing) {
  auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, small_options());
  const std::vector<std::uint32_t> ones(256, 1);
  heap.store(0, ones.data(), ones.size());
  const auto r = run_each<4, 2>(heap, 1, 32, fail_in_own_way{});
  const tx_status want[] = {tx_status::cancelled,      tx_status::out_of_range,
                            tx_status::out_of_range,   tx_status::out_of_range,
                            tx_status::write_set_full, tx_status::read_set_full};
  for (std::uint64_t i = 0; i < 32; ++i) {
    const tx_status expected = i < 6 ? want[i] : tx_status::committed;
    EXPECT_EQ(r[i].status, expected) << "thread " << i << ": " << gpm::to_string(r[i].status);
    EXPECT_EQ(r[i].seq == 0, i < 6) << i;
  }
  const auto w = contents(heap);
  for (std::uint64_t i = 0; i < 32; ++i) EXPECT_EQ(w[i], i < 6 ? 1u : 7u) << i;
  EXPECT_EQ(w[100], 1u);
  EXPECT_EQ(w[101], 1u);
  EXPECT_EQ(heap.durable_seq(), 26u);
}

TEST_F(TxHeap, RecordsLargerThanTheRingOrTheLogAreRefused) {
  gpm::tx_options o = small_options();
  o.ring_chunks = 4;  // 6 pairs make a record of 4 chunks; 7 pairs of 5
  auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, o);
  auto r = run_each(heap, 1, 32, write_run{32, 7, 6, 40});
  EXPECT_EQ(r[0].status, tx_status::record_too_large);
  for (int i = 1; i < 32; ++i) EXPECT_EQ(r[i].status, tx_status::committed) << i;
  // Direct: a 256-byte log holds 16 chunks; 31 pairs need 17 (30 fit).
  auto direct = gpm::tx_heap::create(pool.get(), "d", {.words = 64, .logs = 1, .log_bytes = 256},
                                     small_options(tx_mode::direct));
  r = run_each<32, 32>(direct, 1, 32, write_run{2, 31, 30, 0});
  EXPECT_EQ(r[0].status, tx_status::record_too_large);
  EXPECT_EQ(r[1].status, tx_status::committed);
}

// A kernel the caller launches itself, with heap.ref(): every thread writes its own word.
__global__ void write_own_word(gpm::tx_ref tx, gpm::tx_result* out) {
  const std::uint64_t i = tx.worker_index();
  out[i] = tx.run([&](auto& t) { t.write(i % t.words(), static_cast<std::uint32_t>(i + 1)); });
}

// Every worker adds one to each word its worker-stride loop visits.
struct visit_each_word {
  template <class Tx>
  __device__ void operator()(Tx& tx, std::uint64_t n) const {
    for (std::uint64_t i : tx.workers(n)) tx.run([&](auto& t) { t.write(i, t.read(i) + 1); });
  }
};
__global__ void visit_kernel(gpm::tx_ref tx, std::uint64_t n) { visit_each_word{}(tx, n); }
void visit_in_launch(gpm::tx_heap& heap, std::uint64_t n) {
  heap.launch(3, 64, [=] __device__(gpm::tx_ref tx) { visit_each_word{}(tx, n); });
}

TEST_F(TxHeap, WorkerStrideLoopsVisitEveryIndexOnce) {
  auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, small_options());
  visit_in_launch(heap, 250);  // 192 workers, helpers excluded
  gpm::launch(visit_kernel, 5, 32, 0, nullptr, heap.ref(), std::uint64_t{256});  // 160 threads
  heap.sync();
  const auto w = contents(heap);
  for (std::uint64_t i = 0; i < 256; ++i) EXPECT_EQ(w[i], i < 250 ? 2u : 1u) << i;
}

TEST_F(TxHeap, KernelsLaunchedByTheCallerCommitDirectly) {
  gpm::tx_options o = small_options(tx_mode::helpers);
  o.max_threads = 40;
  auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, o);
  gpm::device_buffer<gpm::tx_result> out(64);
  gpm::launch(write_own_word, 2, 32, 0, nullptr, heap.ref(), out.data());
  heap.sync();
  const auto r = gpm::test::to_host(out);
  for (std::uint64_t i = 0; i < 64; ++i) {
    EXPECT_EQ(r[i].status, i < 40 ? tx_status::committed : tx_status::too_many_threads) << i;
  }
  EXPECT_EQ(heap.durable_seq(), 40u);
  EXPECT_EQ(heap.stats().persisted_bytes, 40 * 2 * gpm::detail::tx::kChunkBytes);
  const auto w = contents(heap);
  for (std::uint64_t i = 0; i < 64; ++i) EXPECT_EQ(w[i], i < 40 ? i + 1 : 0) << i;
}

TEST_F(TxHeap, GivesUpAfterMaxAttempts) {
  gpm::tx_options o = small_options(tx_mode::direct);
  o.max_attempts = 1;
  auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, o);
  results r;
  // Every thread increments word 0, and the seeded schedule interleaves them.
  with_schedule(7, [&] { r = run_each(heap, 2, 64, increment_word0{}); });
  std::uint32_t committed = 0, gave_up = 0;
  for (const auto& x : r.r) {
    ASSERT_TRUE(x.status == tx_status::committed || x.status == tx_status::too_many_aborts)
        << gpm::to_string(x.status);
    EXPECT_EQ(x.attempts, 1u);
    (x.status == tx_status::committed ? committed : gave_up) += 1;
  }
  EXPECT_EQ(contents(heap)[0], committed) << "a transaction that gave up wrote nothing";
  if (GPM_BACKEND_HOST) {
    EXPECT_GT(gave_up, 0u) << "the seeded schedule should make conflicts";
  }
  EXPECT_EQ(heap.stats().aborts, gave_up);
}

// ---- the transaction's operations -------------------------------------------------------------

TEST_F(TxHeap, ReadsSeeOwnWritesAndTypedValuesSpanWholeWords) {
  auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, small_options());
  gpm::device_buffer<std::uint32_t> seen(8);
  seen.fill_bytes(0);
  std::uint32_t* d = seen.data();
  const auto r = run_each(heap, 1, 32, typed_access{d});
  EXPECT_EQ(r[0].status, tx_status::committed);
  EXPECT_EQ(gpm::test::to_host(seen),
            (std::vector<std::uint32_t>{10, 11, 0x89abcdef, 0x01234567, 9, 1, 0, 0}));
  const auto w = contents(heap);
  EXPECT_EQ(w[3], 11u);
  std::uint64_t u;
  std::memcpy(&u, &w[10], 8);
  EXPECT_EQ(u, 0x0123456789abcdefull);
  double x;
  std::memcpy(&x, &w[20], 8);
  EXPECT_EQ(x, 2.5);
  EXPECT_EQ(w[30] + w[31] + w[32], 24u);
  // The record holds 1 + 2 + 2 + 3 pairs: 5 chunks (head, 8 pairs, checksum).
  EXPECT_EQ(heap.stats().persisted_bytes, 5 * gpm::detail::tx::kChunkBytes);
}

TEST_F(TxHeap, OkTurnsFalseOnceAnAttemptIsDoomed) {
  auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, small_options());
  gpm::device_buffer<std::uint32_t> seen(4);
  std::uint32_t* d = seen.data();
  run_each(heap, 1, 32, doom_then_write{d});
  EXPECT_EQ(gpm::test::to_host(seen), (std::vector<std::uint32_t>{1, 2, 1, 2}));
  EXPECT_EQ(contents(heap)[0], 0u);
}

// 64-bit counters incremented by many threads: carries cross the word boundary, and a torn
// 64-bit read or write would lose them.
TEST_F(TxHeap, SixtyFourBitValuesAreNeverTorn) {
  auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, small_options());
  const std::uint64_t start = 0xfffffff0ull;
  std::uint32_t init[2];
  std::memcpy(init, &start, 8);
  heap.store(0, init, 2);
  with_schedule(11, [&] { run_each(heap, 4, 64, add_three_to_u64{}); });
  std::uint64_t got;
  const auto w = contents(heap);
  std::memcpy(&got, w.data(), 8);
  EXPECT_EQ(got, start + 3 * 256);
}

// ---- versioned reads --------------------------------------------------------------------------

// Transfers keep the accounts' total; every committed read-only sum must see it, whichever
// transfers committed around it: a reader that saw some accounts before a transfer and some after
// fails its check at commit and runs again. Locked and versioned reads, several schedules.
TEST_F(TxHeap, ReadOnlyTransactionsSeeConsistentTotals) {
  for (const gpm::tx_reads reads : {gpm::tx_reads::locked, gpm::tx_reads::versioned}) {
    for (const std::uint64_t seed : {3, 4, 5}) {
      SCOPED_TRACE((reads == gpm::tx_reads::versioned ? "versioned, seed " : "locked, seed ") +
                   std::to_string(seed));
      gpm::tx_options o = small_options(tx_mode::direct);
      o.reads = reads;
      const std::string name =
          "sums" + std::to_string(static_cast<int>(reads)) + "_" + std::to_string(seed);
      auto heap = gpm::tx_heap::create(pool.get(), name, kGeometry, o);
      const std::vector<std::uint32_t> start(8, 1000);
      heap.store(0, start.data(), start.size());
      gpm::device_buffer<std::uint32_t> sums(256);
      sums.fill_bytes(0);
      std::uint32_t* d = sums.data();
      results r;
      with_schedule(seed, [&] { r = run_each(heap, 4, 64, transfer_or_sum{d}); });
      for (const auto& x : r.r) ASSERT_EQ(x.status, tx_status::committed);
      const std::vector<std::uint32_t> got = gpm::test::to_host(sums);
      for (std::uint64_t i = 1; i < 256; i += 2) ASSERT_EQ(got[i], 8000u) << "reader " << i;
      const auto w = contents(heap);
      std::uint32_t total = 0;
      for (std::uint32_t k = 0; k < 8; ++k) total += w[k];
      EXPECT_EQ(total, 8000u);
    }
  }
}

// With versioned reads, transactions that only read never take an orec, so readers of the same
// words never abort one another (with locked reads they take each other's orecs).
TEST_F(TxHeap, VersionedReadersOfOneWordNeverConflict) {
  gpm::tx_options o = small_options(tx_mode::direct);
  o.reads = gpm::tx_reads::versioned;
  auto heap = gpm::tx_heap::create(pool.get(), "readers", kGeometry, o);
  with_schedule(6, [&] { run_each(heap, 4, 64, read_eight{}); });
  const gpm::tx_stats stats = heap.stats();
  EXPECT_EQ(stats.commits, 256u);
  EXPECT_EQ(stats.aborts, 0u);
  EXPECT_EQ(heap.durable_seq(), 0u) << "read-only transactions take no sequence number";
}

// ---- persistence modes ------------------------------------------------------------------------

TEST_F(TxHeap, VolatileModeLogsNothingAndLeavesTheHomeImage) {
  {
    auto heap =
        gpm::tx_heap::create(pool.get(), "h", kGeometry, small_options(tx_mode::volatile_only));
    const auto r = run_each(heap, 2, 32, write_nine{});
    for (const auto& x : r.r) {
      EXPECT_EQ(x.status, tx_status::committed);
      EXPECT_EQ(x.seq, 0u);
    }
    EXPECT_EQ(contents(heap)[63], 9u);
    EXPECT_EQ(heap.durable_seq(), 0u);
    const gpm::tx_stats s = heap.stats();
    EXPECT_EQ(s.commits, 64u);
    EXPECT_EQ(s.persisted_bytes, 0u);
  }
  auto again = gpm::tx_heap::open(pool.reopen(), "h", small_options());
  EXPECT_EQ(contents(again)[63], 0u);
}

// The rings' occupancy over the helpers' time (the paper's Fig. 15): launches without a ring
// record none; a ring of 64 chunks under 256 committers a block stands full at times, one of
// 4,096 that a launch's records never fill stays below 1/32.
TEST_F(TxHeap, HelpersRecordHowFullTheirRingsStood) {
  using bins = decltype(gpm::tx_stats::ring_occupancy_ns);
  const auto total = [](const bins& b) { return std::accumulate(b.begin(), b.end(), 0ull); };
  {
    auto heap = gpm::tx_heap::create(pool.get(), "direct", kGeometry, small_options(tx_mode::direct));
    run_each(heap, 4, 256, write_own_number{});
    EXPECT_EQ(total(heap.stats().ring_occupancy_ns), 0u);
    EXPECT_EQ(gpm::tx_ring_occupancy(heap.stats().ring_occupancy_ns, 0.5), 0.0);
  }
  {
    auto heap = gpm::tx_heap::create(pool.get(), "small", kGeometry, small_options());
    run_each(heap, 4, 256, write_own_number{});
    const bins b = heap.stats().ring_occupancy_ns;
    EXPECT_GT(total(b), 0u);
    double before = 0;
    for (const double f : {0.1, 0.5, 0.9, 0.99, 1.0}) {
      const double at = gpm::tx_ring_occupancy(b, f);
      EXPECT_GE(at, before) << f;
      EXPECT_GT(at, 0.0) << f;
      EXPECT_LE(at, 1.0) << f;
      before = at;
    }
    EXPECT_GE(gpm::tx_ring_occupancy(b, 1.0), 0.5) << "256 records a block through 64 chunks";
    expect_error(gpm::errc::invalid_argument, [&] { gpm::tx_ring_occupancy(b, 0); });
    expect_error(gpm::errc::invalid_argument, [&] { gpm::tx_ring_occupancy(b, 1.5); });
  }
  gpm::tx_options big = small_options();
  big.ring_chunks = 4096;
  auto heap = gpm::tx_heap::create(pool.get(), "big", kGeometry, big);
  run_each(heap, 1, 32, write_own_number{});
  const bins b = heap.stats().ring_occupancy_ns;
  EXPECT_GT(total(b), 0u);
  EXPECT_LE(gpm::tx_ring_occupancy(b, 1.0), 2.0 / 64) << "32 records of 2 chunks in 4,096";
}

TEST_F(TxHeap, LaunchesReportWhatTheirKernelTakes) {
  auto direct = gpm::tx_heap::create(pool.get(), "direct", kGeometry, small_options(tx_mode::direct));
  EXPECT_EQ(direct.stats().launch_blocks_per_sm, 0u) << "no launch yet";
  run_each(direct, 4, 256, write_own_number{});
  const gpm::tx_stats d = direct.stats();
  EXPECT_GE(d.launch_blocks_per_sm, 1u);
#if GPM_BACKEND_HOST
  EXPECT_EQ(d.launch_registers, 0u) << "the emulator's kernels are host functions";
#else
  EXPECT_GT(d.launch_registers, 0u);
#endif
  // A ring of about 120 KB of shared memory leaves room for one such block an SM on a GPU.
  gpm::tx_options big = small_options();
  big.ring_chunks = 5000;
  auto helpers = gpm::tx_heap::create(pool.get(), "big", kGeometry, big);
  run_each(helpers, 1, 32, write_own_number{});
  const gpm::tx_stats h = helpers.stats();
  EXPECT_EQ(h.launch_blocks_per_sm, 1u);
  EXPECT_LE(h.launch_blocks_per_sm, d.launch_blocks_per_sm);

  // tx_options::max_blocks_per_sm caps residency (by asking for more shared memory), in a
  // launch with a ring and in one without, and the transactions' results stay right.
  for (const tx_mode mode : {tx_mode::helpers, tx_mode::volatile_only}) {
    for (const std::uint32_t cap : {1u, 2u}) {
      gpm::tx_options o = small_options(mode);
      o.max_blocks_per_sm = cap;
      const std::string name = "capped" + std::to_string(cap) + std::string(gpm::to_string(mode));
      auto heap = gpm::tx_heap::create(pool.get(), name, kGeometry, o);
      const results r = run_each(heap, 4, 256, write_own_number{});
      for (const gpm::tx_result& x : r.r) ASSERT_EQ(x.status, gpm::tx_status::committed) << name;
      EXPECT_EQ(heap.stats().commits, r.r.size()) << name;
      const std::uint32_t resident = heap.stats().launch_blocks_per_sm;
      EXPECT_GE(resident, 1u) << name;
      EXPECT_LE(resident, cap) << name;
    }
  }

  // tx_options::learn_residency: launches of one kernel take turns at fewer blocks an SM while
  // that commits faster (src/tx/residency.hpp; its choices are tested in tx_residency_test.cpp),
  // and every launch's transactions stay right; never more blocks than fit without a cap.
  gpm::tx_options learning = small_options(tx_mode::adaptive);
  learning.learn_residency = true;
  auto learnt = gpm::tx_heap::create(pool.get(), "learnt", kGeometry, learning);
  std::vector<std::uint32_t> seen;  // blocks an SM of each launch
  std::vector<bool> ring;           // whether it had the ring
  for (int launch = 0; launch < 6; ++launch) {
    const std::uint64_t rings = learnt.stats().ring_launches;
    const results r = run_each(learnt, 4, 256, write_own_number{});
    for (const gpm::tx_result& x : r.r) ASSERT_EQ(x.status, gpm::tx_status::committed) << launch;
    seen.push_back(learnt.stats().launch_blocks_per_sm);
    ring.push_back(learnt.stats().ring_launches != rings);
    EXPECT_GE(seen.back(), 1u) << launch;
    EXPECT_LE(seen.back(), d.launch_blocks_per_sm) << launch;
  }
  // Each kind ran first as it fit (the ring at launch 0, direct commits at launch 1); where an
  // SM holds more than one block of it (a GPU; the emulator with GPM_EMU_BLOCKS_PER_SM, as
  // tx_residency_emulated_test runs this), the third launch, of the faster kind, ran a block an
  // SM fewer than that kind's first.
  ASSERT_TRUE(ring[0]);
  ASSERT_FALSE(ring[1]);
  const std::uint32_t first = ring[2] ? seen[0] : seen[1];
  if (first > 1) {
    EXPECT_EQ(seen[2], first - 1) << ::testing::PrintToString(seen);
  }
}

TEST_F(TxHeap, EveryModeAndHelperCountKeepsTheSameResults) {
  struct config {
    tx_mode mode;
    std::uint32_t helpers;
  };
  for (const config c :
       {config{tx_mode::direct, 0}, config{tx_mode::helpers, 1}, config{tx_mode::helpers, 2},
        config{tx_mode::hcl, 0}, config{tx_mode::adaptive, 1}, config{tx_mode::adaptive, 2},
        config{tx_mode::undo, 0}}) {
    gpm::tx_options o = small_options(c.mode);
    if (c.helpers != 0) o.helper_warps = c.helpers;
    if (c.mode == tx_mode::undo) o.max_threads = 256;  // undo slots of 4 chunks in 4 KiB logs
    const std::string name = std::string(gpm::to_string(c.mode)) + std::to_string(c.helpers);
    {
      auto heap = gpm::tx_heap::create(pool.get(), name, kGeometry, o);
      run_each(heap, 4, 64, add_and_count{});
      EXPECT_EQ(heap.durable_seq(), 256u) << name;
      const gpm::tx_stats s = heap.stats();
      EXPECT_EQ(s.commits, 256u) << name;
      EXPECT_EQ(s.durable_seq, 256u) << name;
      // Two pairs a record: head and pair, pair and checksum.
      EXPECT_EQ(s.persisted_bytes, 256 * 2 * gpm::detail::tx::kChunkBytes) << name;
    }
    auto again = gpm::tx_heap::open(pool.get(), name, o);
    expect_add_and_count(again, 1, name);
  }
}

TEST_F(TxHeap, SyncAppliesWithTheReplayKernelsOrOnTheHost) {
  for (const tx_mode mode : {tx_mode::direct, tx_mode::helpers, tx_mode::hcl}) {
    for (const bool kernels : {true, false}) {
      gpm::tx_options o = small_options(mode);
      o.background_apply = false;  // every record waits for sync()
      o.gpu_replay = kernels;
      const std::string name =
          std::string(gpm::to_string(mode)) + (kernels ? "-kernels" : "-host");
      {
        auto heap = gpm::tx_heap::create(pool.get(), name, kGeometry, o);
        run_each(heap, 4, 64, add_and_count{});
        heap.sync();
        const gpm::tx_stats s = heap.stats();
        EXPECT_EQ(s.durable_seq, 256u) << name;
        EXPECT_EQ(s.replayed_on_gpu, kernels ? 256u : 0u) << name;
        EXPECT_EQ(s.applied_on_host, kernels ? 0u : 256u) << name;
        EXPECT_EQ(s.replay_runs, kernels ? 1u : 0u) << name;
      }
      // sync() left every commit in the home image: a reopened heap has nothing to replay.
      auto again = gpm::tx_heap::open(pool.get(), name, o);
      EXPECT_EQ(again.last_recovery().replayed, 0u) << name;
      expect_add_and_count(again, 1, name);
    }
  }
}

// Registered again as tx_replay_no_room_test with an emulated GPU of 128 MiB (host backend):
// the replay kernels would need a claim per word, 32 MiB for this heap, over a quarter of what
// is free, so sync() and recovery apply on the host and lose nothing.
TEST_F(TxHeap, WithoutRoomForTheReplayKernelsTheHostApplies) {
  std::size_t free_bytes = 0, total_bytes = 0;
  gpm::check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  if (total_bytes > (256u << 20)) {
    GTEST_SKIP() << "needs a GPU of at most 256 MiB: ctest runs it as tx_replay_no_room_test";
  }
  const gpm::tx_geometry g{.words = 8u << 20, .logs = 4, .log_bytes = 64 << 10};
  gpm::test::scratch_pool big("tx-no-room", 64u << 20);
  gpm::tx_options o = small_options(tx_mode::direct);
  o.background_apply = false;
  o.orecs = 1 << 10;
  {
    auto heap = gpm::tx_heap::create(big.get(), "h", g, o);
    run_each(heap, 4, 64, add_and_count{});
    heap.sync();
    const gpm::tx_stats s = heap.stats();
    EXPECT_EQ(s.replayed_on_gpu, 0u);
    EXPECT_EQ(s.applied_on_host, 256u);
    launch_add_and_count(heap);  // 256 more, left in the logs (no sync()): recovery replays them
  }
  auto again = gpm::tx_heap::open(big.get(), "h", o);
  EXPECT_EQ(again.last_recovery().replayed, 256u);
  EXPECT_EQ(again.stats().replayed_on_gpu, 0u);
  expect_add_and_count(again, 2, "no room");
}

// The same emulated GPU: the claims and the window fit a quarter of it, a copy of these logs
// (32 MiB) does not, so the replay kernels read the logs in the pool in place.
TEST_F(TxHeap, WithoutRoomForACopyOfTheLogsTheKernelsReadThePool) {
  std::size_t free_bytes = 0, total_bytes = 0;
  gpm::check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  if (total_bytes > (256u << 20)) {
    GTEST_SKIP() << "needs a GPU of at most 256 MiB: ctest runs it as tx_replay_no_room_test";
  }
  const gpm::tx_geometry g{.words = 1024, .logs = 4, .log_bytes = 8 << 20};
  gpm::test::scratch_pool big("tx-no-log-copy", 48u << 20);
  gpm::tx_options o = small_options(tx_mode::direct);
  o.background_apply = false;
  {
    auto heap = gpm::tx_heap::create(big.get(), "h", g, o);
    run_each(heap, 4, 64, add_and_count{});
    EXPECT_EQ(heap.stats().replayed_on_gpu, 256u);
    launch_add_and_count(heap);  // left in the logs: recovery replays them
  }
  auto again = gpm::tx_heap::open(big.get(), "h", o);
  EXPECT_EQ(again.last_recovery().replayed, 256u);
  EXPECT_EQ(again.stats().replayed_on_gpu, 256u);
  expect_add_and_count(again, 2, "no log copy");
}

// ---- adaptive switch, HCL-striped records, calibration -----------------------------------------

TEST_F(TxHeap, AdaptiveAndUndoOptionsAndLaunchesAreChecked) {
  gpm::pool& p = pool.get();
  const auto create = [&p](gpm::tx_options o) {
    return [&p, o] { gpm::tx_heap::create(p, "bad", kGeometry, o); };
  };
  gpm::tx_options o = small_options(tx_mode::adaptive);
  o.switch_threshold = -1;
  expect_error(gpm::errc::invalid_argument, create(o));
  o = small_options(tx_mode::adaptive);
  o.slice_us = 0;
  expect_error(gpm::errc::invalid_argument, create(o));
  o = small_options(tx_mode::direct);
  o.replay_window = 0;
  expect_error(gpm::errc::invalid_argument, create(o));
  o = small_options(tx_mode::helpers);
  o.max_blocks_per_sm = 33;
  expect_error(gpm::errc::invalid_argument, create(o));
  o = small_options(tx_mode::helpers);
  o.learn_residency = true;  // adaptive mode's: it learns from adaptive's measured launches
  expect_error(gpm::errc::invalid_argument, create(o));
  o = small_options(tx_mode::adaptive);
  o.learn_residency = true;
  o.max_blocks_per_sm = 2;  // a fixed cap and a learnt one
  expect_error(gpm::errc::invalid_argument, create(o));
  o = small_options(tx_mode::adaptive);
  o.helper_warps = 3;
  expect_error(gpm::errc::invalid_argument, create(o));
  o = small_options(tx_mode::adaptive);
  o.ring_chunks = 1;
  expect_error(gpm::errc::invalid_argument, create(o));
  o = small_options();
  o.mode = static_cast<tx_mode>(17);
  expect_error(gpm::errc::invalid_argument, create(o));
  EXPECT_FALSE(p.find("bad")) << "a rejected create must not allocate";
  o = small_options(tx_mode::undo);  // 4096 threads' undo slots do not fit in 4 logs of 4 KiB
  expect_error(gpm::errc::invalid_argument, create(o));
  EXPECT_FALSE(p.find("bad"));
  auto heap = gpm::tx_heap::create(p, "h", kGeometry, small_options(tx_mode::adaptive));
  const no_work body{};
  expect_error(gpm::errc::invalid_argument, [&] { heap.launch(5, 32, body); });    // 4 logs
  expect_error(gpm::errc::invalid_argument, [&] { heap.launch(1, 1024, body); });  // + helpers
}

// Without learning (the paper's switch alone), a launch gets the ring after one that persisted
// faster than the threshold (and the first launch always does); without the ring, every commit
// is direct.
TEST_F(TxHeap, AdaptiveChoosesTheRingPerLaunchFromTheLastLaunchsBandwidth) {
  for (const double threshold : {0.0, 1e30}) {
    const std::string name = threshold == 0 ? "hot" : "cold";
    SCOPED_TRACE(name);
    gpm::tx_options o = small_options(tx_mode::adaptive);
    o.switch_threshold = threshold;
    o.learn = false;
    auto heap = gpm::tx_heap::create(pool.get(), name, kGeometry, o);
    run_each(heap, 1, 256, add_and_count{});
    if (GPM_BACKEND_HOST && threshold == 0) {
      // The first launch starts OFF and turns ON at its first slice: its commits follow the
      // monitor within the launch (the block reads it at each of its reports), so some go
      // through the ring. One block: each block also reads it as it starts, so several blocks
      // starting at different moments would mix ring and direct commits even if the block never
      // looked again. On the emulator, where 256 commits take many 1 us slices; a GPU may
      // finish in one.
      const gpm::tx_stats first = heap.stats();
      EXPECT_GT(first.ring_commits, 0u);
      EXPECT_LT(first.ring_commits, first.commits);
    }
    for (int launch = 1; launch < 3; ++launch) run_each(heap, 4, 64, add_and_count{});
    const gpm::tx_stats s = heap.stats();
    EXPECT_EQ(s.launches, 3u);
    EXPECT_EQ(s.commits, 3 * 256u);
    EXPECT_EQ(s.durable_seq, 3 * 256u);
    EXPECT_EQ(s.switch_threshold, threshold);
    if (threshold == 0) {
      EXPECT_EQ(s.ring_launches, 3u);
      EXPECT_GT(s.ring_commits, 0u);
      EXPECT_GT(s.slices_on, 0u);
      EXPECT_GE(s.switches, 1u);
    } else {
      EXPECT_EQ(s.ring_launches, 1u);
      EXPECT_EQ(s.ring_commits, 0u);
      EXPECT_EQ(s.slices_on, 0u);
      EXPECT_EQ(s.switches, 0u);
    }
    const auto w = contents(heap);
    EXPECT_EQ(w[255], 3 * 256u);
  }
}

// Each kernel is learnt: its first launch gets the ring (helpers held on), its second runs
// without it, whatever the threshold says, later ones take whichever committed faster, and the
// kind that lost is measured again after 16 launches, then after 32, 64, ... while it keeps
// losing, and again after 16 once the winner changes.
TEST_F(TxHeap, AdaptiveLearnsEachKernelsFasterKind) {
  for (const double threshold : {0.0, 1e30}) {
    const std::string name = threshold == 0 ? "hot" : "cold";
    SCOPED_TRACE(name);
    gpm::tx_options o = small_options(tx_mode::adaptive);
    o.switch_threshold = threshold;
    auto heap = gpm::tx_heap::create(pool.get(), name, kGeometry, o);
    const auto ring_launch = [&heap](auto body) {
      const std::uint64_t before = heap.stats().ring_launches;
      run_each(heap, 4, 64, body);
      return heap.stats().ring_launches - before == 1;
    };
    EXPECT_TRUE(ring_launch(add_and_count{})) << "the first launch measures the ring";
    EXPECT_FALSE(ring_launch(add_and_count{})) << "the second measures direct commits";
    const bool third = ring_launch(add_and_count{});
    const gpm::tx_stats s = heap.stats();
    EXPECT_GT(s.ring_commit_rate, 0);
    EXPECT_GT(s.direct_commit_rate, 0);
    EXPECT_EQ(third, s.ring_commit_rate >= s.direct_commit_rate)
        << s.ring_commit_rate << " vs " << s.direct_commit_rate;
    EXPECT_EQ(s.switch_threshold, threshold);
    EXPECT_GT(s.ring_commits, 0u);  // the first launch's helpers persisted records
    // Another kernel is learnt on its own: its first launch measures the ring again.
    EXPECT_TRUE(ring_launch(write_own_number{}));
    // Launches 3 .. 18 of the first kernel (counting from 0): the faster kind, but the other
    // (last run at launch 0, 1 or 2) runs by launch 18 at the latest, whichever wins, and however
    // the measured rates move.
    int rings = 0;
    for (int launch = 3; launch <= 18; ++launch) rings += ring_launch(add_and_count{});
    EXPECT_GT(rings, 0);
    EXPECT_LT(rings, 16);
    const gpm::tx_stats end = heap.stats();
    EXPECT_EQ(end.launches, 20u);
    EXPECT_EQ(end.commits, 20 * 256u);
    EXPECT_EQ(end.durable_seq, 20 * 256u);
    // write_own_number left 255 in the counter word; 16 add_and_count launches followed
    EXPECT_EQ(contents(heap)[255], 255 + 16 * 256u);
  }
}

// The 32 lanes of a tile committing together write one group: member i's chunk j at position
// j * 32 + i, each first chunk's head naming the width and the member.
TEST_F(TxHeap, HclStripesTheRecordsOfLanesThatCommitTogether) {
  auto heap = gpm::tx_heap::create(pool.get(), "h", kGeometry, small_options(tx_mode::hcl));
  heap.launch(1, 32, warp_writes_own_word{});
  heap.sync();
  EXPECT_EQ(heap.durable_seq(), 32u);
  const auto w = contents(heap);
  for (std::uint32_t i = 0; i < 32; ++i) EXPECT_EQ(w[i], i + 1);
  gpm::pool& p = pool.get();
  const auto* h = p.host_ptr<gpm::detail::tx::heap_header>(p.get("h").offset);
  const gpm::detail::tx::heap_layout layout{h->words, h->log_chunks, h->logs};
  const auto* log0 =
      p.host_ptr<std::uint64_t>(p.get("h").offset + layout.log_offset());  // chunk i: 2 slots
  std::vector<std::uint64_t> seqs;
  for (std::uint32_t i = 0; i < 32; ++i) {
    EXPECT_EQ(gpm::detail::tx::width_of(log0[2 * i]), 32u) << i;
    EXPECT_EQ(gpm::detail::tx::rank_of(log0[2 * i]), i) << i;
    EXPECT_EQ(gpm::detail::tx::count_of(log0[2 * i]), 1u) << i;
    seqs.push_back(gpm::detail::tx::seq_near(log0[2 * i], 0));
    // The member's second chunk, its pair and a zero slot, lies one row below.
    EXPECT_EQ(log0[2 * (32 + i)], gpm::detail::tx::pair_slot(i, i + 1)) << i;
    EXPECT_EQ(log0[2 * (32 + i) + 1], 0u) << i;
  }
  // Consecutive numbers 1 .. 32, one per member in rank order.
  for (std::uint32_t i = 0; i < 32; ++i) EXPECT_EQ(seqs[i], seqs[0] + i);
  EXPECT_EQ(seqs[0], 1u);
  EXPECT_EQ(heap.stats().persisted_bytes, 32 * 2 * gpm::detail::tx::kChunkBytes);
}

// The crossover must hold at two points in a row (or the last): one noisy point where helpers
// happen to win neither sets the threshold low nor, losing, pushes it past the real crossover.
TEST(TxCalibration, ThresholdIsTheFirstPointFromWhichHelpersKeepWinning) {
  const auto point = [](double direct_s, double helpers_s, double direct_bw) {
    return gpm::tx_calibration_point{.threads = 256,
                                     .direct_seconds = direct_s,
                                     .helpers_seconds = helpers_s,
                                     .direct_bandwidth = direct_bw,
                                     .helpers_bandwidth = 0};
  };
  using points = std::vector<gpm::tx_calibration_point>;
  // helpers lose, win once (noise), lose, then win from the fourth point on
  EXPECT_EQ(gpm::tx_calibration_threshold(points{point(1, 2, 10), point(1, 0.5, 20),
                                                 point(1, 2, 30), point(2, 1, 40),
                                                 point(2, 1, 50)}),
            40);
  // helpers win everywhere: the first point's bandwidth
  EXPECT_EQ(gpm::tx_calibration_threshold(points{point(2, 1, 10), point(2, 1, 20)}), 10);
  // a win at the last point counts
  EXPECT_EQ(gpm::tx_calibration_threshold(points{point(1, 2, 10), point(2, 1, 20)}), 20);
  // never, or only at one point followed by a loss: helpers never turn on
  EXPECT_TRUE(std::isinf(gpm::tx_calibration_threshold(points{point(1, 2, 10)})));
  EXPECT_TRUE(std::isinf(
      gpm::tx_calibration_threshold(points{point(2, 1, 10), point(1, 2, 20)})));
  EXPECT_TRUE(std::isinf(gpm::tx_calibration_threshold(points{})));
}

TEST_F(TxHeap, CalibrationSweepsWritePressureAndCachesItsThreshold) {
  gpm::pool& p = pool.get();
  const gpm::tx_calibration small{
      .writes = 2, .reps = 2, .min_threads = 32, .max_threads = 128, .workers_per_block = 64};
  const auto sweep = [&p](gpm::tx_calibration c) {
    return [&p, c] { gpm::tx_calibrate_sweep(p, c); };
  };
  gpm::tx_calibration bad = small;
  bad.writes = 0;
  expect_error(gpm::errc::invalid_argument, sweep(bad));
  bad.writes = 33;
  expect_error(gpm::errc::invalid_argument, sweep(bad));
  bad = small;
  bad.reps = 0;
  expect_error(gpm::errc::invalid_argument, sweep(bad));
  bad = small;
  bad.repeats = 0;
  expect_error(gpm::errc::invalid_argument, sweep(bad));
  bad = small;
  bad.min_threads = 256;  // above max_threads
  expect_error(gpm::errc::invalid_argument, sweep(bad));
  bad = small;
  bad.workers_per_block = 48;
  expect_error(gpm::errc::invalid_argument, sweep(bad));
  bad = small;
  bad.max_threads = 1 << 22;  // 32 MiB of words: more than the pool
  expect_error(gpm::errc::out_of_memory, sweep(bad));
  EXPECT_FALSE(p.find("gpm.tx.calibrate"));

  const gpm::tx_calibration_result r = gpm::tx_calibrate_sweep(p, small);
  EXPECT_FALSE(p.find("gpm.tx.calibrate")) << "the scratch heap is freed";
  ASSERT_EQ(r.points.size(), 3u);
  bool threshold_is_a_point = std::isinf(r.threshold);
  for (std::size_t i = 0; i < r.points.size(); ++i) {
    const gpm::tx_calibration_point& x = r.points[i];
    EXPECT_EQ(x.threads, 32u << i);
    EXPECT_GT(x.direct_seconds, 0);
    EXPECT_GT(x.helpers_seconds, 0);
    EXPECT_GT(x.direct_bandwidth, 0);
    EXPECT_GT(x.helpers_bandwidth, 0);
    threshold_is_a_point = threshold_is_a_point || r.threshold == x.direct_bandwidth;
  }
  EXPECT_TRUE(threshold_is_a_point) << r.threshold;

  // The first calibration of the process is the one every later call and adaptive heap uses.
  const double threshold = gpm::tx_calibrate(p, small);
  EXPECT_EQ(gpm::tx_calibrate(p), threshold);
  gpm::tx_options o = small_options(tx_mode::adaptive);
  o.switch_threshold.reset();
  auto heap = gpm::tx_heap::create(p, "calibrated", kGeometry, o);
  EXPECT_EQ(heap.stats().switch_threshold, threshold);
}

}  // namespace
