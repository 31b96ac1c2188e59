// gpmbench workloads tx_atm_a1 and tx_atm_a2: the Helper Warps paper's ATM (TPDS'20 §6.3), bank
// transfers between two random accounts as transactions on a gpm::tx_heap whose words are the
// balances. A1: 1M transfers over 100K accounts (many conflicts); A2: 1M over 1M accounts. The
// application also serves tx_ring_sweep (tx_micro.cu).
#include <numeric>

#include <gpm/platform/hash.hpp>

#include "gpmbench/resources.hpp"
#include "workloads/tx/tx_apps.hpp"

namespace gpmbench::tx {

namespace {

// Every account starts with this much, far more than its transfers can take out (a transfer
// moves 1..60 and an account pays in a few dozen of a repeat's transfers at most), so no transfer
// is cancelled and every one commits.
constexpr std::uint32_t kInitialBalance = 1u << 24;

// Transfer i: payer, payee (another account) and amount, from a seeded hash of i.
struct transfer_plan {
  std::uint32_t accounts;
  std::uint64_t seed;

  GPM_HOST_DEVICE std::uint32_t from(std::uint64_t i) const {
    return static_cast<std::uint32_t>(gpm::mix64(seed ^ (3 * i)) % accounts);
  }
  GPM_HOST_DEVICE std::uint32_t to(std::uint64_t i) const {
    const auto shift =
        1 + static_cast<std::uint32_t>(gpm::mix64(seed ^ (3 * i + 1)) % (accounts - 1));
    return (from(i) + shift) % accounts;
  }
  GPM_HOST_DEVICE std::uint32_t amount(std::uint64_t i) const {
    return 1 + static_cast<std::uint32_t>(gpm::mix64(seed ^ (3 * i + 2)) % 60);
  }
};

// The kernel body: each worker runs transfers in a worker-stride loop, one transaction each; a
// payer who cannot pay cancels the transfer.
struct transfers {
  transfer_plan plan;
  std::uint64_t count;
  std::uint64_t* failures;

  __device__ void operator()(gpm::tx_ref tx) const {
    std::uint64_t failed = 0;
    for (std::uint64_t i : tx.workers(count)) {
      const std::uint32_t a = plan.from(i), b = plan.to(i), x = plan.amount(i);
      const gpm::tx_result r = tx.run([&](auto& t) {
        const std::uint32_t have = t.read(a);
        if (have < x) return t.cancel();
        t.write(a, have - x);
        t.write(b, t.read(b) + x);
      });
      failed += r.status != gpm::tx_status::committed;
    }
    count_failures(failures, failed);
  }
};

class atm final : public application {
 public:
  atm(std::uint64_t accounts, std::uint64_t transfers)
      : plan_{static_cast<std::uint32_t>(accounts), 0x41544d},  // "ATM"
        transfers_(transfers),
        initial_(accounts, kInitialBalance) {}

  std::uint64_t words() const override { return plan_.accounts; }
  std::uint64_t transactions() const override { return transfers_; }
  std::uint32_t record_words() const override { return 2; }
  named_counts sizes() const override {
    return {{"accounts", plan_.accounts}, {"transfers", transfers_}};
  }
  void reset(gpm::tx_heap& heap) override { heap.store(0, initial_.data(), initial_.size()); }
  std::vector<double> run(gpm::tx_heap& heap, launch_shape launch, cudaStream_t s) override {
    return {failures_.timed_launch(heap, launch, s,
                                   transfers{plan_, transfers_, failures_.device()}, "ATM")};
  }
  // Transfers move money, never make or lose it: in every state a prefix of them leads to, too.
  void check(const gpm::tx_heap& heap, bool) override {
    std::vector<std::uint32_t> balances(plan_.accounts);
    heap.load(0, balances.data(), balances.size());
    const std::uint64_t total = std::accumulate(balances.begin(), balances.end(), std::uint64_t{0});
    const std::uint64_t want = std::uint64_t{kInitialBalance} * plan_.accounts;
    if (total != want) {
      check_failed("ATM: the balances sum to " + std::to_string(total) + ", not " +
                   std::to_string(want));
    }
  }

 private:
  transfer_plan plan_;
  std::uint64_t transfers_;
  std::vector<std::uint32_t> initial_;
  failure_counter failures_;
};

}  // namespace

application_factory atm_application(std::uint64_t accounts, std::uint64_t transfers) {
  return [=](const mode_context& ctx) -> std::unique_ptr<application> {
    return std::make_unique<atm>(scaled(ctx, accounts, 16, 256), scaled(ctx, transfers, 16, 256));
  };
}

}  // namespace gpmbench::tx

namespace gpmbench {

workload tx_atm_a1_workload() {
  return tx::paper_workload("tx_atm_a1",
                            "ATM A1: 1M transfers over 100K accounts as transactions (TPDS'20)",
                            tx::atm_application(100'000, 1'000'000));
}

workload tx_atm_a2_workload() {
  return tx::paper_workload("tx_atm_a2",
                            "ATM A2: 1M transfers over 1M accounts as transactions (TPDS'20)",
                            tx::atm_application(1'000'000, 1'000'000));
}

}  // namespace gpmbench
