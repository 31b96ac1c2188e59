// The log module in one program: a small persistent key-value table in a pool updated by GPU
// kernels under each kind of logging (GPM, ASPLOS'22, §5.2):
//   1. hcl_log: every thread logs the slot it overwrites (Figure 6's gpKVS), a "crash" leaves the
//      batch half done, and a recovery kernel undoes it from the log;
//   2. conv_log: one thread per block logs the table's size before growing it;
//   3. undo_tx: the same batch as (1) with begin / commit / recover doing the bookkeeping.
// Runs on the GPU (cuda build) or on the host emulator.
//
//   logging_example [--pm-dir DIR]
#include <gpm/log/conv_log.cuh>
#include <gpm/log/hcl_log.cuh>
#include <gpm/log/undo_tx.cuh>
#include <gpm/pool/pool.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

namespace {

constexpr std::uint32_t kBlocks = 8, kThreads = 128, kSlots = kBlocks * kThreads;

struct slot {
  std::uint64_t key;
  std::uint64_t value;
};

struct undo_entry {  // what gpKVS logs before overwriting a slot
  std::uint32_t index;
  std::uint32_t pad;
  slot old;
};

// 1. Each thread logs its slot, then overwrites it. Threads of odd blocks stop before the
// update, as if the program had crashed with the batch half done.
__global__ void put_logged(gpm::hcl_log_ref log, gpm::pool_ref pool, std::uint64_t table,
                           std::uint64_t round) {
  const auto i = static_cast<std::uint32_t>(gpm::tile_index());
  slot* s = pool.ptr<slot>(table) + i;
  const undo_entry e{i, 0, *s};
  // Full or wrong geometry: leave the slot alone (the host learns of it from check_faults).
  if (log.insert(e) != gpm::log_status::ok) return;
  if (blockIdx.x % 2 == 1) return;  // the "crash"
  *s = slot{i, round * 1000 + i};
  gpm::persist();
}

// Recovery (Figure 6b): each thread undoes its own entries, newest first.
__global__ void undo_from_log(gpm::hcl_log_ref log, gpm::pool_ref pool, std::uint64_t table) {
  undo_entry e;
  while (log.read(e) == gpm::log_status::ok) {
    pool.ptr<slot>(table)[e.index] = e.old;
    gpm::persist();
    log.remove(sizeof e);
  }
}

// 2. Thread 0 of each block logs the size, then adds its block's slots to it.
__global__ void grow(gpm::conv_log_ref meta, gpm::pool_ref pool, std::uint64_t size_off) {
  if (threadIdx.x != 0) return;
  std::uint64_t* size = pool.ptr<std::uint64_t>(size_off);
  gpm::atomic_ref<std::uint64_t, gpm::thread_scope::system> sz(*size);
  const std::uint32_t partition = blockIdx.x % meta.partitions();
  if (meta.insert(partition, sz.load()) != gpm::log_status::ok) return;
  sz.fetch_add(kThreads);
  gpm::persist();
}

// 3. The same update through an undo transaction: log, store and persist in one call.
__global__ void put_tx(gpm::undo_tx_ref tx, gpm::pool_ref pool, std::uint64_t table,
                       std::uint64_t round) {
  const auto i = static_cast<std::uint32_t>(gpm::tile_index());
  tx.update(pool.ptr<slot>(table) + i, slot{i, round * 1000 + i});
}

std::uint64_t table_sum(gpm::pool& p, std::uint64_t table) {
  std::uint64_t sum = 0;
  for (std::uint32_t i = 0; i < kSlots; ++i) sum += p.host_ptr<slot>(table)[i].value;
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  gpm::pool_options o;
  if (argc == 3 && std::strcmp(argv[1], "--pm-dir") == 0) o.pm_dir = argv[2];
  const std::string name = "logging-example-" + std::to_string(getpid()) + ".pool";
  try {
    gpm::pool p = gpm::pool::create(name, 8 << 20, "logging-example", o);
    const std::uint64_t table = p.allocate("table", kSlots * sizeof(slot));
    const std::uint64_t size_off = p.allocate("size", sizeof(std::uint64_t));

    // 1. hcl_log
    gpm::hcl_log log = gpm::hcl_log::create(
        p, "kv-undo", {kBlocks, kThreads, 4 * gpm::hcl_log::entry_footprint(sizeof(undo_entry))});
    const std::uint64_t before = table_sum(p, table);
    gpm::launch(put_logged, log.grid(), log.block(), 0, nullptr, log.ref(), p.ref(), table,
                std::uint64_t{1});
    gpm::check_cuda(cudaDeviceSynchronize(), "put_logged");
    log.check_faults();
    const std::uint64_t half = table_sum(p, table);
    gpm::launch(undo_from_log, log.grid(), log.block(), 0, nullptr, log.ref(), p.ref(), table);
    gpm::check_cuda(cudaDeviceSynchronize(), "undo_from_log");
    std::printf(
        "hcl_log:  table sum %llu -> %llu after the half-done batch -> %llu after undo "
        "(log empty: %s)\n",
        static_cast<unsigned long long>(before), static_cast<unsigned long long>(half),
        static_cast<unsigned long long>(table_sum(p, table)), log.is_empty() ? "yes" : "no");

    // 2. conv_log
    gpm::conv_log meta = gpm::conv_log::create(p, "meta", 4, 1024);
    gpm::launch(grow, kBlocks, kThreads, 0, nullptr, meta.ref(), p.ref(), size_off);
    gpm::check_cuda(cudaDeviceSynchronize(), "grow");
    meta.check_faults();
    std::printf("conv_log: size %llu, %llu bytes logged in partition 0\n",
                static_cast<unsigned long long>(*p.host_ptr<std::uint64_t>(size_off)),
                static_cast<unsigned long long>(meta.size(0)));
    meta.clear();  // the growth is complete: its undo records are no longer needed

    // 3. undo_tx
    gpm::undo_tx tx = gpm::undo_tx::create(p, "kv-tx", {kBlocks, kThreads, 256});
    tx.recover();  // what a program does first after a restart
    tx.begin();
    gpm::launch(put_tx, tx.grid(), tx.block(), 0, nullptr, tx.ref(), p.ref(), table,
                std::uint64_t{2});
    tx.commit();
    const std::uint64_t committed = table_sum(p, table);
    tx.begin();
    gpm::launch(put_tx, tx.grid(), tx.block(), 0, nullptr, tx.ref(), p.ref(), table,
                std::uint64_t{3});
    gpm::check_cuda(cudaDeviceSynchronize(), "put_tx");
    // No commit: as after a crash, recover() undoes the batch on the GPU.
    const bool undone = tx.recover();
    std::printf("undo_tx:  committed sum %llu; uncommitted batch undone: %s; sum now %llu\n",
                static_cast<unsigned long long>(committed), undone ? "yes" : "no",
                static_cast<unsigned long long>(table_sum(p, table)));
    const bool ok = table_sum(p, table) == committed && log.is_empty();
    p.close();
    gpm::pool::remove(name, o);
    return ok ? 0 : 1;
  } catch (const gpm::error& e) {
    std::fprintf(stderr, "logging_example: %s\n", e.what());
    try {
      gpm::pool::remove(name, o);
    } catch (const gpm::error&) {
      // the pool was never created
    }
    return 1;
  }
}
