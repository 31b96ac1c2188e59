// Crash-image tests of gpm::tx (gpm/platform/crash_image.hpp; docs/crash-checking.md). A small ATM
// workload (unconditional transfers between 8 accounts, each transaction also setting its own
// marker word) runs on the host emulator under the checker, in direct, hcl, helpers and undo modes:
// launches of 2 blocks committing 8 transactions each into logs of 512 bytes (2 KiB in undo mode),
// which wrap every launch or two; after a launch the heap is synced, or, every fifth launch, closed
// without a sync and opened again (recovery replays what the logs hold). At the module's crash
// points (tx.apply, tx.flip, tx.recover.replayed, tx.recover.flipped; inside kernels
// tx.commit.written, tx.drain, tx.publish, tx.undo.logged, tx.undo.written) and between launches
// (workload.between_ops), the
// checker writes every crash image (the persisted lines plus subsets of the unpersisted ones); the
// check opens the heap on it (recovery) and requires:
//  - the image holds a set of the workload's transactions whole: markers 0 or 1, and the balances
//    are the initial ones with exactly those transfers applied (so the total is unchanged);
//  - redo modes: that set is the first n commits by sequence number, recovery reports n applied,
//    and n reaches every commit durable at the crash: acknowledged by durable_seq(), persisted
//    when run() returned (direct), or persisted before the kernel ended (hcl: by every lane of
//    its striped group, helpers: by the helper warps);
//  - undo mode: every transaction whose run() had returned is in it, and recovery's applied root
//    is at least the acknowledged one.
// An image taken inside a kernel cannot be checked there (recovery copies to the GPU's memory,
// which waits for the kernel in flight): it is kept with the model of that moment and checked at
// the next crash point in host code. The emulator runs one block at a time, and the heaps run
// without the background reproducer thread (tx_options::background_apply), so that no other thread
// persists while the checker looks: a persist by another thread during an exploration would be
// lost to the model.
// A second workload recovers an undo heap from an image taken at tx.undo.written (a live undo
// record: recovery rolls it back) under the checker, then runs on.
// With every persist site present no image fails; with any one site disabled (a mutation: the
// persist deleted), some image must fail in every mode that relies on it. src/tx/tx_heap.cu lists
// the sites. Trials: GPMKIT_CRASH_TRIALS seeds per mode (2 by default, more in crash-long).
#include <gpm/config.hpp>
#include <gpm/platform/crash_image.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/pool/pool.hpp>
#include <gpm/tx/tx_heap.cuh>
#if GPM_BACKEND_HOST
#include <gpm/platform/emulator.hpp>
#endif

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernel_image_checks.hpp"
#include "tx_test_support.hpp"

namespace {

using gpm::tx_mode;
using namespace gpm::test::tx;

constexpr char kLayout[] = "tx-crash-image";
constexpr char kPool[] = "bank.pool";
constexpr char kHeap[] = "bank";
constexpr std::uint64_t kPoolBytes = 64 << 10;
constexpr std::uint32_t kBlocks = 2, kWorkers = 32;
constexpr std::uint32_t kPerBlock = 8;  // transactions per block and launch
constexpr std::uint64_t kPerLaunch = kBlocks * kPerBlock;
constexpr std::uint32_t kAccounts = 8, kBalance = 1000;
constexpr int kReopenEvery = 5;  // launch b % 5 == 3: closed without a sync and opened again

atm workload(std::uint64_t seed, int launches) {
  return {.accounts = kAccounts,
          .transactions = kPerLaunch * static_cast<std::uint64_t>(launches),
          .seed = seed,
          .conditional = false};
}

// Logs of 32 chunks (redo): a launch writes 24 chunks into each, so they wrap every launch or two
// and a launch never waits for space (no thread applies records while it runs). Undo mode gives
// each warp 32 x 4 chunks of undo slots.
gpm::tx_geometry geometry_of(tx_mode mode, std::uint64_t words) {
  return {.words = words, .logs = kBlocks, .log_bytes = mode == tx_mode::undo ? 2048u : 512u};
}

// gpu_replay false: sync() and recovery apply records on the host (the reproducer's passes).
gpm::tx_options options_of(tx_mode mode, bool gpu_replay = true) {
  gpm::tx_options o;
  o.mode = mode;
  o.gpu_replay = gpu_replay;
  o.helper_warps = 1;
  o.ring_chunks = 16;  // a block's 24 chunks wrap the ring
  o.max_threads = kBlocks * kWorkers;
  o.background_apply = false;
  return o;
}

gpm::pool_options pool_options_for(const gpm::test::scratch_dirs& d) {
  return gpm::test::image_options(d, 8);
}

// Transactions [first, first + kPerLaunch): block b's workers 0..7 run transactions
// first + 8b .. first + 8b + 7, one each; every worker calls run() (the others with an empty body).
// Each writes its sequence number to seqs[i], or ~0 if it did not commit.
void launch_batch(gpm::tx_heap& heap, const atm& w, std::uint64_t first, std::uint64_t* seqs) {
  heap.launch(kBlocks, kWorkers, [=] __device__(gpm::tx_ref tx) {
    const std::uint64_t me = tx.worker_index();
    const bool mine = me % kWorkers < kPerBlock;
    const std::uint64_t i = first + me / kWorkers * kPerBlock + me % kWorkers;
    const gpm::tx_result r = tx.run([&](auto& t) {
      if (mine) w(t, i);
    });
    if (mine) seqs[i] = r.status == gpm::tx_status::committed ? r.seq : ~0ull;
  });
}

// What the workload knows at a crash.
struct model {
  tx_mode mode = tx_mode::direct;
  bool gpu_replay = true;           // tx_options::gpu_replay
  bool creating = true;             // until store() returned: the heap may be missing, or all zero
  bool in_kernel = false;           // a launch is running
  std::uint64_t acked = 0;          // durable_seq() last returned
  std::vector<std::uint32_t> base;  // the words the transactions started from
  std::string doing;
};

// The largest n such that commits 1 .. n all returned from run() (their seqs in `returned`).
std::uint64_t returned_prefix(const std::vector<std::uint64_t>& returned) {
  std::vector<std::uint64_t> s;
  for (std::uint64_t q : returned) {
    if (q != 0 && q != ~0ull) s.push_back(q);
  }
  std::sort(s.begin(), s.end());
  std::uint64_t n = 0;
  for (std::uint64_t q : s) {
    if (q == n + 1) n = q;
  }
  return n;
}

// The invariant on the heap recovered from `image`. `returned`: the transactions' seqs when the
// crash came (0: run() had not returned); `seqs`: as every transaction run so far finished.
std::string check_image(const std::string& image, const gpm::pool_options& o, const model& m,
                        const atm& w, const std::vector<std::uint64_t>& returned,
                        const std::vector<std::uint64_t>& seqs) {
  gpm::pool p = gpm::pool::open(image, kLayout, o);
  if (m.creating) {
    const std::optional<gpm::pool_object> obj = p.find(kHeap);
    if (!obj) return "";  // not allocated yet
    char magic[8];
    std::memcpy(magic, p.host_ptr<char>(obj->offset), sizeof magic);
    if (std::all_of(magic, magic + 8, [](char c) { return c == 0; })) return "";  // no header yet
  }
  gpm::tx_options to = options_of(m.mode, m.gpu_replay);
  const gpm::tx_heap heap = gpm::tx_heap::open(p, kHeap, geometry_of(m.mode, w.words()), to);
  std::vector<std::uint32_t> words(w.words());
  heap.load(0, words.data(), words.size());
  const std::uint64_t applied = heap.last_recovery().applied_seq;
  if (m.creating) {
    if (std::any_of(words.begin(), words.end(), [](std::uint32_t x) { return x != 0; })) {
      return "a heap being created holds a word that is not zero";
    }
    return "";
  }
  std::vector<std::uint32_t> expect = m.base;
  std::uint64_t in = 0, total = 0;  // new transactions in the image; all (base's too)
  for (std::uint64_t i = 0; i < w.transactions; ++i) {
    const std::uint32_t marker = words[w.accounts + i], before = m.base[w.accounts + i];
    const std::string which =
        "transaction " + std::to_string(i) + " (seq " + std::to_string(seqs[i]) + ")";
    if (marker > 1) return which + " has marker " + std::to_string(marker);
    total += marker;
    if (before == 1) {
      if (marker != 1) return which + ", committed before, is not in the image";
      continue;
    }
    if (marker == 0) continue;
    if (seqs[i] == 0 || seqs[i] == ~0ull) return which + " is in the image but never committed";
    w.apply(expect, i);
    ++in;
  }
  for (std::uint32_t a = 0; a < w.accounts; ++a) {
    if (words[a] != expect[a]) {
      return "account " + std::to_string(a) + " holds " + std::to_string(words[a]) + ", not the " +
             std::to_string(expect[a]) + " of the " + std::to_string(in) +
             " transactions whose markers the image holds (a torn or lost write)";
    }
  }
  if (m.mode == tx_mode::undo) {
    for (std::uint64_t i = 0; i < w.transactions; ++i) {
      if (returned[i] != 0 && words[w.accounts + i] != 1) {
        return "transaction " + std::to_string(i) + " (seq " + std::to_string(returned[i]) +
               ") had returned from run() but is not in the image";
      }
    }
    if (applied < m.acked || applied > total) {
      return "recovery's applied root is " + std::to_string(applied) + ", acknowledged " +
             std::to_string(m.acked) + ", with " + std::to_string(total) + " transactions";
    }
    return "";
  }
  if (applied != in) {
    return "recovery reports " + std::to_string(applied) + " commits applied, the image holds " +
           std::to_string(in);
  }
  for (std::uint64_t i = 0; i < w.transactions; ++i) {
    if (seqs[i] == 0 || seqs[i] == ~0ull) continue;
    if ((words[w.accounts + i] == 1) != (seqs[i] <= in)) {
      return "transaction " + std::to_string(i) + " with seq " + std::to_string(seqs[i]) + " is " +
             (words[w.accounts + i] == 1 ? "in" : "not in") + " the image, which holds " +
             std::to_string(in) + " commits: not a prefix";
    }
  }
  // Durable: acknowledged; or persisted when run() returned (direct); or, in hcl mode, by every
  // lane of its striped group (recovery reads a group only whole: a lane that returned does not
  // make its commit recoverable while a lane of its group has not persisted), and by the helpers,
  // before the kernel ended.
  const std::uint64_t persisted =
      m.mode != tx_mode::direct && m.in_kernel ? 0 : returned_prefix(returned);
  const std::uint64_t durable = std::max(m.acked, persisted);
  if (in < durable) {
    return "the image holds the first " + std::to_string(in) + " commits; the first " +
           std::to_string(durable) + " were durable (acknowledged " + std::to_string(m.acked) + ")";
  }
  return "";
}

// What a check knows: the model, and the sequence number each transaction's run() returned so far
// (read from device memory, which is host memory on the emulator: inside a kernel no other fiber
// runs while the checker explores).
struct known {
  model m;
  std::vector<std::uint64_t> returned;
};

// The check handed to the checker (tests/support/kernel_image_checks.hpp): images taken inside
// kernels are checked at the next crash point in host code, against what was known when taken.
gpm::test::kernel_image_checks<known> image_checks(const model& m, const atm& w,
                                                   const gpm::device_buffer<std::uint64_t>& seqs,
                                                   const gpm::pool_options& o,
                                                   const std::string& kept_path) {
  return {[&m, &seqs] {
            return known{m, std::vector<std::uint64_t>(seqs.data(), seqs.data() + seqs.size())};
          },
          [](const known& k) {
            const std::string returned(reinterpret_cast<const char*>(k.returned.data()),
                                       k.returned.size() * sizeof(std::uint64_t));
            return k.m.doing + ", acknowledged " + std::to_string(k.m.acked) +
                   (k.m.in_kernel ? ", in a kernel" : "") + (k.m.creating ? ", creating" : "") +
                   ", returned #" + std::to_string(std::hash<std::string>{}(returned));
          },
          [&w, o](const std::string& path, const known& kept, const known& now) {
            return check_image(path, o, kept.m, w, kept.returned, now.returned);
          },
          kept_path};
}

// Runs launches [from, to) of `w` on `heap`, keeping `m` up to date; after each, a sync, or (every
// kReopenEvery launches) the heap closed without one and opened again, as a restarted program
// would.
void run_launches(gpm::pool& p, std::optional<gpm::tx_heap>& heap, model& m, const atm& w,
                  gpm::device_buffer<std::uint64_t>& seqs, int from, int to, bool reopen) {
  for (int b = from; b < to; ++b) {
    m.doing = "launch " + std::to_string(b);
    m.in_kernel = true;
    launch_batch(*heap, w, b * kPerLaunch, seqs.data());
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    m.in_kernel = false;
    for (std::uint64_t i = b * kPerLaunch; i < (b + 1) * kPerLaunch; ++i) {
      ASSERT_NE(seqs.data()[i], 0u) << "transaction " << i << " did not run";
      ASSERT_NE(seqs.data()[i], ~0ull) << "transaction " << i << " did not commit";
    }
    gpm::crash_point("workload.between_ops");
    if (reopen && b % kReopenEvery == 3) {
      m.doing = "reopen after launch " + std::to_string(b);
      heap.reset();
      heap.emplace(
          gpm::tx_heap::open(p, kHeap, geometry_of(m.mode, w.words()),
                             options_of(m.mode, m.gpu_replay)));
    } else {
      m.doing = "sync after launch " + std::to_string(b);
      heap->sync();
    }
    m.acked = heap->durable_seq();
    gpm::crash_point("workload.between_ops");
  }
}

struct run_result {
  std::optional<gpm::crash_image_failure> failure;
  gpm::crash_image_stats stats;
  std::uint64_t kernel_images = 0;
  std::uint64_t checked = 0;
};

const std::vector<std::string> kCrashPoints = {"tx.apply",
                                               "tx.flip",
                                               "tx.recover.replayed",
                                               "tx.recover.flipped",
                                               "tx.drain",
                                               "tx.publish",
                                               "tx.undo.logged",
                                               "tx.undo.written",
                                               "tx.commit.written",
                                               "workload.between_ops"};

gpm::crash_image_options checker_options(const gpm::test::scratch_dirs& d, std::uint64_t seed,
                                         const std::string& disabled_site) {
  gpm::crash_image_options co;
  co.image_path = d.pool_path("image.pool");
  co.crash_points = kCrashPoints;
  co.exhaustive_lines = 6;
  co.random_images = 6;
  co.seed = seed;
  co.disabled_site = disabled_site;
  return co;
}

// The emulator runs one block at a time, its threads switching at random from `seed`.
class emulator_schedule {
 public:
  explicit emulator_schedule(std::uint64_t seed) {
#if GPM_BACKEND_HOST
    saved_ = gpm::emu::current_options();
    gpm::emu::options o = saved_;
    o.workers = 1;
    o.seed = seed;
    o.yield_every = 2;
    gpm::emu::set_options(o);
#endif
  }
  ~emulator_schedule() {
#if GPM_BACKEND_HOST
    gpm::emu::set_options(saved_);
#endif
  }

 private:
#if GPM_BACKEND_HOST
  gpm::emu::options saved_;
#endif
};

// The ATM workload in `mode` under the checker, from the pool's creation.
run_result check_workload(tx_mode mode, std::uint64_t seed, int launches,
                          const std::string& disabled_site, bool gpu_replay = true) {
  const emulator_schedule schedule(seed);
  gpm::test::scratch_dirs d("tx-crash-image");
  const gpm::pool_options o = pool_options_for(d);
  const atm w = workload(seed, launches);
  gpm::device_buffer<std::uint64_t> seqs(w.transactions);
  seqs.fill_bytes(0);
  model m;
  m.mode = mode;
  m.gpu_replay = gpu_replay;
  m.base = w.initial(kBalance);
  auto checks = image_checks(m, w, seqs, o, d.pool_path("kept.pool"));
  gpm::crash_image_checker checker([&](const std::string& image) { return checks(image); },
                                   checker_options(d, seed, disabled_site));
  {
    gpm::pool p = gpm::pool::create(kPool, kPoolBytes, kLayout, o);
    std::optional<gpm::tx_heap> heap;
    m.doing = "create";
    heap.emplace(gpm::tx_heap::create(p, kHeap, geometry_of(mode, w.words()),
                                      options_of(mode, gpu_replay)));
    heap->store(0, m.base.data(), m.base.size());
    m.creating = false;
    gpm::crash_point("workload.between_ops");
    run_launches(p, heap, m, w, seqs, 0, launches, true);
  }
  return {checker.failure(), checker.stats(), checks.kernel_images(), checks.checked()};
}

// The undo workload's recovery of a live undo record: an image taken at tx.undo.written during
// launch 1 (its transaction's new values in the home image, its undo record live) is opened under
// the checker, which explores the recovery that rolls it back, then 2 more launches run.
run_result check_rollback(std::uint64_t seed, const std::string& disabled_site) {
  const emulator_schedule schedule(seed);
  gpm::test::scratch_dirs d("tx-crash-image-rollback");
  const gpm::pool_options o = pool_options_for(d);
  constexpr int kLaunches = 4;
  const atm w = workload(seed, kLaunches);
  gpm::device_buffer<std::uint64_t> seqs(w.transactions);
  seqs.fill_bytes(0);
  const std::string live = d.pool_path("live.pool");
  std::vector<std::uint64_t> returned;
  {
    // Saves an image at tx.undo.written once some of launch 1's transactions have returned.
    gpm::crash_image_options co;
    co.image_path = d.pool_path("image.pool");
    co.crash_points = {"tx.undo.written"};
    int calls = 0;
    gpm::crash_image_checker saver(
        [&](const std::string& image) {
          if (++calls == static_cast<int>(kPerLaunch) + 6) {
            std::filesystem::copy_file(image, live);
            returned.assign(seqs.data(), seqs.data() + seqs.size());
          }
          return std::string();
        },
        co);
    gpm::pool p = gpm::pool::create(kPool, kPoolBytes, kLayout, o);
    std::optional<gpm::tx_heap> heap;
    heap.emplace(gpm::tx_heap::create(p, kHeap, geometry_of(tx_mode::undo, w.words()),
                                      options_of(tx_mode::undo)));
    const std::vector<std::uint32_t> initial = w.initial(kBalance);
    heap->store(0, initial.data(), initial.size());
    model ignored;
    ignored.mode = tx_mode::undo;
    run_launches(p, heap, ignored, w, seqs, 0, 2, false);
    if (::testing::Test::HasFatalFailure()) return {};
  }
  if (!std::filesystem::exists(live)) {
    ADD_FAILURE() << "no image was saved at tx.undo.written";
    return {};
  }
  // What recovering it gives (rolling back is deterministic): the base of what follows.
  model m;
  m.mode = tx_mode::undo;
  std::filesystem::copy_file(live, d.pool_path("base.pool"));
  {
    gpm::pool p = gpm::pool::open(d.pool_path("base.pool"), kLayout, o);
    const gpm::tx_heap heap = gpm::tx_heap::open(p, kHeap, geometry_of(tx_mode::undo, w.words()),
                                                 options_of(tx_mode::undo));
    if (heap.last_recovery().rolled_back == 0) {
      ADD_FAILURE() << "the saved image holds no live undo record";
      return {};
    }
    m.base.resize(w.words());
    heap.load(0, m.base.data(), m.base.size());
  }
  // The transactions that had returned must be in the base; the rest start afresh.
  for (std::uint64_t i = 0; i < w.transactions; ++i) {
    if (returned[i] != 0 && m.base[w.accounts + i] != 1) {
      ADD_FAILURE() << "recovery rolled back transaction " << i << ", which had returned";
      return {};
    }
  }
  seqs.fill_bytes(0);
  auto checks = image_checks(m, w, seqs, o, d.pool_path("kept.pool"));
  gpm::crash_image_checker checker([&](const std::string& image) { return checks(image); },
                                   checker_options(d, seed, disabled_site));
  m.creating = false;
  m.doing = "recovery of the image from tx.undo.written";
  {
    gpm::pool p = gpm::pool::open(live, kLayout, o);
    std::optional<gpm::tx_heap> heap;
    heap.emplace(gpm::tx_heap::open(p, kHeap, geometry_of(tx_mode::undo, w.words()),
                                    options_of(tx_mode::undo)));
    m.acked = heap->durable_seq();
    gpm::crash_point("workload.between_ops");
    run_launches(p, heap, m, w, seqs, 2, kLaunches, false);
  }
  return {checker.failure(), checker.stats(), checks.kernel_images(), checks.checked()};
}

// Every test here runs on the host emulator (see the top of the file).
class TxCrashImageTest : public ::testing::Test {
 protected:
  void SetUp() override {
#if !GPM_BACKEND_HOST
    GTEST_SKIP() << "kernels on a GPU do not feed the crash-image checker's model";
#endif
  }
};

const std::vector<tx_mode> kModes = {tx_mode::direct, tx_mode::hcl, tx_mode::helpers,
                                     tx_mode::undo};

// The sites each mode reaches, and those whose removal it must catch.
std::vector<std::string> sites_reached(tx_mode mode) {
  std::vector<std::string> s = {"tx.create.header", "tx.create.root", "tx.store.home",
                                "tx.recover.root", "tx.recover.head"};
  if (mode == tx_mode::undo) {
    s.insert(s.end(), {"tx.undo.log", "tx.undo.home", "tx.undo.retire", "tx.sync.root"});
    return s;
  }
  s.insert(s.end(), {mode == tx_mode::helpers ? "tx.drain.chunks" : "tx.commit.record",
                     "tx.apply.home", "tx.apply.root", "tx.apply.head", "tx.recover.home"});
  return s;
}

const std::vector<std::string> kSites = {
    "tx.commit.record", "tx.drain.chunks",  "tx.undo.log",     "tx.undo.home",
    "tx.undo.retire",   "tx.create.header", "tx.create.root",  "tx.store.home",
    "tx.apply.home",    "tx.apply.root",    "tx.apply.head",   "tx.sync.root",
    "tx.recover.home",  "tx.recover.undo",  "tx.recover.root", "tx.recover.head",
};

// Undo epochs do not use the logs' heads: no image can need tx.recover.head there.
bool must_catch(tx_mode mode, const std::string& site) {
  return !(mode == tx_mode::undo && site == "tx.recover.head");
}

void print_run(const char* what, std::uint64_t seed, const run_result& r) {
  std::printf(
      "%s seed %llu: %llu crash points explored, %llu images (%llu inside kernels), %llu checked, "
      "at most %zu dirty lines\n",
      what, static_cast<unsigned long long>(seed),
      static_cast<unsigned long long>(r.stats.explorations),
      static_cast<unsigned long long>(r.stats.images),
      static_cast<unsigned long long>(r.kernel_images), static_cast<unsigned long long>(r.checked),
      r.stats.most_dirty_lines);
}

TEST_F(TxCrashImageTest, EveryImageOfEveryModeRecovers) {
  const int trials = gpm::test::crash_trials(2);
  for (const tx_mode mode : kModes) {
    const std::string what(gpm::to_string(mode));
    for (int t = 0; t < trials; ++t) {
      const std::uint64_t seed = gpm::test::trial_seed(t);
      const run_result r = check_workload(mode, seed, trials > 2 ? 30 : 12, "");
      ASSERT_FALSE(HasFatalFailure());
      ASSERT_FALSE(r.failure) << what << " seed " << seed << ": " << r.failure->describe();
      print_run(what.c_str(), seed, r);
      for (const std::string& site : sites_reached(mode)) {
        EXPECT_TRUE(r.stats.site_hits.contains(site)) << what << ": " << site << " never reached";
      }
      EXPECT_GT(r.kernel_images, 0u) << what;
    }
  }
  // The host's passes, which sync() and recovery use without the replay kernels.
  for (int t = 0; t < trials; ++t) {
    const std::uint64_t seed = gpm::test::trial_seed(t);
    const run_result r = check_workload(tx_mode::direct, seed, trials > 2 ? 30 : 12, "", false);
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_FALSE(r.failure) << "host replay seed " << seed << ": " << r.failure->describe();
    print_run("redo-direct, host replay", seed, r);
    for (const std::string& site : sites_reached(tx_mode::direct)) {
      EXPECT_TRUE(r.stats.site_hits.contains(site)) << "host replay: " << site << " never reached";
    }
  }
}

TEST_F(TxCrashImageTest, EveryImageOfAnUndoRollbackRecovers) {
  const int trials = gpm::test::crash_trials(2);
  for (int t = 0; t < trials; ++t) {
    const std::uint64_t seed = gpm::test::trial_seed(t);
    const run_result r = check_rollback(seed, "");
    ASSERT_FALSE(HasFatalFailure());
    ASSERT_FALSE(r.failure) << "seed " << seed << ": " << r.failure->describe();
    print_run("undo rollback", seed, r);
    EXPECT_TRUE(r.stats.site_hits.contains("tx.recover.undo"));
  }
}

class TxPersistSite : public TxCrashImageTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(TxPersistSite, RemovalIsCaught) {
  const std::string& site = GetParam();
  if (site == "tx.recover.undo") {
    const run_result r = check_rollback(1, site);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_TRUE(r.stats.site_hits.contains(site)) << "the rollback never reached the site";
    ASSERT_TRUE(r.failure) << "no crash image failed without " << site << " (" << r.stats.images
                           << " images)";
    std::printf("undo rollback without %s: %s\n", site.c_str(), r.failure->describe().c_str());
    return;
  }
  int modes = 0;
  for (const tx_mode mode : kModes) {
    const std::vector<std::string> reached = sites_reached(mode);
    if (std::find(reached.begin(), reached.end(), site) == reached.end() ||
        !must_catch(mode, site)) {
      continue;
    }
    ++modes;
    const std::string what(gpm::to_string(mode));
    const run_result r = check_workload(mode, 1, 12, site);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_TRUE(r.stats.site_hits.contains(site)) << what << " never reached the site";
    EXPECT_TRUE(r.failure) << "no crash image of " << what << " failed without " << site << " ("
                           << r.stats.images << " images)";
    if (r.failure) {
      std::printf("%s without %s: %s\n", what.c_str(), site.c_str(), r.failure->describe().c_str());
    }
  }
  EXPECT_GT(modes, 0) << "no mode reaches " << site;
  // The home image's sites, written by the host's passes instead of the replay kernels.
  if (site == "tx.apply.home" || site == "tx.recover.home") {
    const run_result r = check_workload(tx_mode::direct, 1, 12, site, false);
    ASSERT_FALSE(HasFatalFailure());
    EXPECT_TRUE(r.stats.site_hits.contains(site)) << "host replay never reached the site";
    EXPECT_TRUE(r.failure) << "no crash image of host replay failed without " << site;
  }
}

INSTANTIATE_TEST_SUITE_P(Tx, TxPersistSite, ::testing::ValuesIn(kSites),
                         [](const auto& info) { return gpm::test::site_test_name(info.param); });

}  // namespace
