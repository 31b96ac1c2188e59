// The paper's transaction markers (include/gpm/compat/tx.hpp): its write-pressure
// micro-benchmark (TPDS'20, Fig. 6) written with TX_START / TX_WRITE / TX_COMMIT, and a
// read-modify-write with TX_READ, in every persistence mode.
#include <gpm/compat/tx.hpp>
#include <gpm/pool/pool.hpp>
#include <gpm/tx/tx_heap.cuh>

#include "tx_test_support.hpp"

namespace {

constexpr int kWrites = 4, kReps = 3;

// Fig. 6, with the heap explicit: each thread writes its id into its own kWrites words.
__device__ void writetest(gpm::tx_ref heap, int nwrites, int nrep) {
  const std::uint64_t tid = heap.worker_index(), my_idx = tid * nwrites;
  for (int rep = 0; rep < nrep; rep++) {
    TX_START(heap, tx);
    for (int i = 0; i < nwrites; i++) TX_WRITE(tx, my_idx + i, static_cast<std::uint32_t>(tid));
    TX_COMMIT;
  }
}

// The write test, then every thread adds one to a shared counter.
void run_writetest(gpm::tx_heap& heap) {
  heap.launch(2, 128, [] __device__(gpm::tx_ref heap) {
    writetest(heap, kWrites, kReps);
    TX_START(heap, tx);
    TX_WRITE(tx, 256 * kWrites, TX_READ(tx, 256 * kWrites) + 1);
    TX_COMMIT;
  });
  heap.sync();
}

TEST(TxCompat, ThePapersWriteTestRunsInEveryMode) {
  gpm::test::scratch_pool pool("tx-compat");
  for (const gpm::tx_mode mode :
       {gpm::tx_mode::volatile_only, gpm::tx_mode::direct, gpm::tx_mode::helpers,
        gpm::tx_mode::adaptive, gpm::tx_mode::hcl, gpm::tx_mode::undo}) {
    gpm::tx_options o;
    o.mode = mode;
    o.max_threads = 256;
    o.switch_threshold = 0;
    const std::string name(gpm::to_string(mode));
    auto heap = gpm::tx_heap::create(pool.get(), name, {.words = 256 * kWrites + 1, .logs = 2}, o);
    run_writetest(heap);
    std::vector<std::uint32_t> w(256 * kWrites + 1);
    heap.load(0, w.data(), w.size());
    for (std::uint64_t i = 0; i < 256 * kWrites; ++i) ASSERT_EQ(w[i], i / kWrites) << name;
    EXPECT_EQ(w.back(), 256u) << name;
    EXPECT_EQ(heap.durable_seq(), mode == gpm::tx_mode::volatile_only ? 0u : 256u * (kReps + 1))
        << name;
  }
}

}  // namespace
