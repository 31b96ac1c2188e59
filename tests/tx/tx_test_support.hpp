// What the tx module's tests share: the ATM workload (the paper's bank transfers, §6.3) as a
// transaction body with its sequential reference, a launch that runs it over any tile size,
// and seeded emulator schedules. Scratch pools come from tests/support/scratch_pool.hpp.
#pragma once

#include <gpm/config.hpp>
#include <gpm/platform/kernel.cuh>
#include <gpm/tx/tx_heap.cuh>
#if GPM_BACKEND_HOST
#include <gpm/platform/emulator.hpp>
#endif

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "scratch_pool.hpp"

namespace gpm::test::tx {

// Transfers between `accounts` accounts (words 0 .. accounts - 1). Transaction i also writes its
// own marker word accounts + i: 1 when it moved the money, 2 when the payer could not pay (a
// conditional transfer, so the outcome depends on the order), so every transaction takes a
// sequence number and the state tells which ones committed.
struct atm {
  std::uint32_t accounts = 0;
  std::uint64_t transactions = 0;
  std::uint64_t seed = 0;
  bool conditional = true;  // false: pay whatever the balance (order-independent outcome)

  GPM_HOST_DEVICE std::uint64_t words() const { return accounts + transactions; }
  GPM_HOST_DEVICE std::uint32_t from(std::uint64_t i) const {
    return static_cast<std::uint32_t>(mix64(seed ^ (i * 3)) % accounts);
  }
  GPM_HOST_DEVICE std::uint32_t to(std::uint64_t i) const {
    const auto shift = 1 + static_cast<std::uint32_t>(mix64(seed ^ (i * 3 + 1)) % (accounts - 1));
    return (from(i) + shift) % accounts;
  }
  GPM_HOST_DEVICE std::uint32_t amount(std::uint64_t i) const {
    return 1 + static_cast<std::uint32_t>(mix64(seed ^ (i * 3 + 2)) % 60);
  }
  // The marker and the balances after transaction i, given the balances before.
  GPM_HOST_DEVICE std::uint32_t marker(std::uint32_t payer_balance, std::uint64_t i) const {
    return !conditional || payer_balance >= amount(i) ? 1 : 2;
  }

  // The transaction body.
  template <class Tx>
  __device__ void operator()(Tx& t, std::uint64_t i) const {
    const std::uint32_t a = from(i), b = to(i);
    const std::uint32_t pay = t.read(a);
    const std::uint32_t m = marker(pay, i);
    if (m == 1) {
      t.write(a, pay - amount(i));
      t.write(b, t.read(b) + amount(i));
    }
    t.write(accounts + i, m);
  }
  // The same, sequentially, on a host copy of the heap.
  void apply(std::vector<std::uint32_t>& w, std::uint64_t i) const {
    const std::uint32_t m = marker(w[from(i)], i);
    if (m == 1) {
      w[from(i)] -= amount(i);
      w[to(i)] += amount(i);
    }
    w[accounts + i] = m;
  }
  // The heap's initial contents: every account holds `balance`, no marker set.
  std::vector<std::uint32_t> initial(std::uint32_t balance) const {
    std::vector<std::uint32_t> w(words(), 0);
    std::fill(w.begin(), w.begin() + accounts, balance);
    return w;
  }
};

// What each transaction reported, written by the kernel into device-accessible arrays.
struct outcome_arrays {
  std::uint64_t* seq;
  tx_status* status;
};

// Runs transactions [first, first + count) of `w` in one tx_heap::launch, each lane of a tile
// of G threads its own transaction; writes each one's sequence number and status.
template <unsigned G>
void launch_atm(tx_heap& heap, const atm& w, std::uint64_t first, std::uint64_t count,
                std::uint32_t blocks, std::uint32_t workers, outcome_arrays out,
                cudaStream_t stream = nullptr) {
  heap.launch(
      blocks, workers,
      [=] __device__(tx_ref tx) {
        const auto tile = make_tile<G>();
        const std::uint64_t stride = tx.worker_count();
        const std::uint64_t rounds = (count + stride - 1) / stride;
        for (std::uint64_t round = 0; round < rounds; ++round) {
          const std::uint64_t k = round * stride + tx.worker_index();
          const std::uint64_t i = first + k;
          const tx_result r = tx.run(tile, [&](auto& t) {
            if (k < count) w(t, i);
          });
          if (k < count) {
            out.seq[i] = r.seq;
            out.status[i] = r.status;
          }
        }
      },
      stream);
}

// Runs `fn` while the host emulator switches threads at random every couple of atomics and
// fences, from `seed` (on a GPU: just runs it).
template <class Fn>
void with_schedule(std::uint64_t seed, Fn&& fn) {
#if GPM_BACKEND_HOST
  const emu::options before = emu::current_options();
  emu::options seeded = before;
  seeded.seed = seed;
  seeded.yield_every = 2;
  emu::set_options(seeded);
  try {
    fn();
  } catch (...) {
    emu::set_options(before);
    throw;
  }
  emu::set_options(before);
#else
  (void)seed;
  fn();
#endif
}

// The transactions in sequence order (those with seq 0 left out).
inline std::vector<std::uint64_t> by_seq(const std::vector<std::uint64_t>& seq) {
  std::vector<std::uint64_t> order;
  for (std::uint64_t i = 0; i < seq.size(); ++i) {
    if (seq[i] != 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return seq[a] < seq[b]; });
  return order;
}

}  // namespace gpm::test::tx
