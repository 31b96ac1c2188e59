// The Helper Warps paper's transaction markers (TPDS'20, Fig. 6: TX_START ... TX_COMMIT) on top
// of gpm::tx_ref::run, for porting code written in the paper's style. New code should call
// run() directly: it returns the transaction's gpm::tx_result, which these markers drop.
//
//   __global__ void writetest(gpm::tx_ref heap, int nwrites, int nrep) {   // the paper's Fig. 6
//     const std::uint64_t tid = heap.worker_index(), my_idx = tid * nwrites;
//     for (int rep = 0; rep < nrep; rep++) {
//       TX_START(heap, tx);
//       for (int i = 0; i < nwrites; i++) TX_WRITE(tx, my_idx + i, tid);
//       TX_COMMIT;
//     }
//   }
//
// The statements between the markers are the transaction's body: they run once per attempt, and
// every heap access goes through TX_READ / TX_WRITE (32-bit words; tx.read_as / tx.write_as for
// wider values). The paper's STM instrumented plain loads and stores; here the heap is explicit.
#pragma once

#include <gpm/config.hpp>

#if defined(__CUDACC__) || GPM_BACKEND_HOST
#include <gpm/tx/tx_ref.cuh>

// The markers open and close a lambda between them.
// clang-format off
#define TX_START(heap, tx) (heap).run([&](auto& tx) {
#define TX_COMMIT })
// clang-format on
#define TX_READ(tx, word) (tx).read(word)
#define TX_WRITE(tx, word, value) (tx).write((word), (value))
#endif
