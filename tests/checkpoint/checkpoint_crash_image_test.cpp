// Crash-image tests of gpm::checkpointer (gpm/platform/crash_image.hpp). A workload registers
// chunks, changes them and checkpoints their groups under the checker, with both engines: GPM's
// (GPU stores, no optimisations, synchronous checkpoints) and HeteroCheckpoint's (DMA, redundant
// chunks skipped by the predictor, pre-copy hints, asynchronous checkpoints). At every crash point
// of the checkpoint protocol, and between two operations, the checker writes each crash image (the
// persisted lines plus any subset of the unpersisted ones) and the check takes the real restore
// path on it: it opens the pool and the checkpoint, attaches buffers, and restores every group,
// which must hold the last checkpoint the workload saw completed (or, while a checkpoint of the
// group is running, that one or the one before), bit for bit, with no copy repaired (a crash
// never damages a copy; a repair means a copy the record in force vouches for was not durable).
// With every persist site present no image fails; with any one of the checkpoint's persist sites
// disabled (a mutation: the persist deleted), some image must fail. docs/crash-checking.md holds
// the table of sites and the tests that catch their removal.
// Trials: GPMKIT_CRASH_TRIALS workloads per engine with different seeds (2 by default, more in
// crash-long).
#include <gpm/checkpoint/checkpoint.hpp>
#include <gpm/platform/crash_image.hpp>
#include <gpm/platform/crash_point.hpp>
#include <gpm/pool/pool.hpp>

#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "scratch_pool.hpp"

namespace {

constexpr char kLayout[] = "checkpoint-crash-image";
constexpr char kPool[] = "work.pool";
constexpr char kCheckpoint[] = "train";
constexpr std::uint64_t kPoolBytes = 64 << 10;  // small: every image is written whole

// The chunks: two of group 0, registered first (in either order), and one of group 1, registered
// later, once checkpoints of group 0 are in force. Sizes span several 64-byte lines.
struct chunk_spec {
  const char* name;
  std::uint64_t words;
  std::uint32_t group;
};
constexpr chunk_spec kChunks[] = {{"weights", 64, 0}, {"bias", 24, 0}, {"input", 40, 1}};
constexpr std::uint32_t kGroups = 2;

const chunk_spec& spec_of(const std::string& name) {
  for (const chunk_spec& c : kChunks) {
    if (name == c.name) return c;
  }
  throw std::out_of_range("no chunk named " + name);
}

const std::vector<std::string> kCrashPoints = {
    "checkpoint.add.copies_allocated",    // a chunk's copies allocated, its entry not yet written
    "checkpoint.copied",                  // the working copies written, not flipped
    "checkpoint.record.entries_written",  // the flip half written
    "checkpoint.committed",               // flipped, checkpoint() not returned yet
    "workload.between_ops",               // what the last operation left must be durable
};

const char* const kSites[] = {"checkpoint.create.header", "checkpoint.add.entry",
                              "checkpoint.copy.working", "checkpoint.record.write"};

enum class engine { gpm, hetero };
const char* to_string(engine e) { return e == engine::gpm ? "gpm" : "hetero"; }

gpm::checkpoint_options checkpoint_options_for(engine e) {
  gpm::checkpoint_options o;
  o.max_chunks = 4;
  o.path = e == engine::gpm ? gpm::copy_path::gpu_stores : gpm::copy_path::dma;
  o.eliminate_redundant = e == engine::hetero;
  o.honour_precopy = e == engine::hetero;
  o.notice = [](const std::string&) {};
  return o;
}

gpm::pool_options pool_options_for(const gpm::test::scratch_dirs& d) {
  return gpm::test::image_options(d, 16);
}

using words = std::vector<std::uint64_t>;

// A group's state as one checkpoint captured it.
struct group_checkpoint {
  std::uint64_t seq = 0;  // 0: none
  std::map<std::string, words> chunks;
};

// What the workload knows: the chunks whose add() returned, the last completed checkpoint of
// each group, and the operation in flight (a crash image may show it done or not, never half).
struct checkpoint_model {
  std::set<std::string> added;
  std::string adding;
  group_checkpoint committed[kGroups];
  std::optional<std::pair<std::uint32_t, group_checkpoint>> running;
};

// The first word where `got` and `want` differ, in words; "" if they are equal.
std::string compare(const std::string& chunk, const words& got, const words& want) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got.at(i) != want[i]) {
      return "chunk \"" + chunk + "\" word " + std::to_string(i) + " is " + std::to_string(got[i]) +
             ", not " + std::to_string(want[i]);
    }
  }
  return "";
}

// Opens the checkpoint on the image, attaches a buffer to every chunk it holds, and restores each
// group: the chunks must be those added, and each group the checkpoint the model expects.
std::string check_image(const std::string& image, const gpm::pool_options& po, engine e,
                        const checkpoint_model& m) {
  gpm::pool p = gpm::pool::open(image, kLayout, po);
  gpm::checkpointer cp = gpm::checkpointer::open(p, kCheckpoint, checkpoint_options_for(e));
  std::map<std::string, gpm::device_buffer<std::uint64_t>> buffers;
  for (const gpm::chunk_info& c : cp.chunks()) {
    if (!m.added.contains(c.name) && c.name != m.adding) {
      return "chunk \"" + c.name + "\" exists but was never added";
    }
    const chunk_spec& s = spec_of(c.name);
    if (c.bytes != s.words * 8 || c.group != s.group) {
      return "chunk \"" + c.name + "\" has " + std::to_string(c.bytes) + " bytes in group " +
             std::to_string(c.group);
    }
    auto& b = buffers.emplace(c.name, gpm::device_buffer<std::uint64_t>(s.words)).first->second;
    b.fill_bytes(0);
    cp.add(c.name, b.data(), s.words, s.group);
  }
  for (const std::string& name : m.added) {
    if (!buffers.contains(name)) return "chunk \"" + name + "\" was added but is missing";
  }
  for (std::uint32_t g = 0; g < kGroups; ++g) {
    std::vector<const group_checkpoint*> allowed{&m.committed[g]};
    if (m.running && m.running->first == g) allowed.push_back(&m.running->second);
    const std::uint64_t last = cp.last_checkpoint(g);
    const group_checkpoint* want = nullptr;
    for (const group_checkpoint* a : allowed) {
      if (a->seq == last) want = a;
    }
    if (want == nullptr) {
      return "group " + std::to_string(g) + "'s last checkpoint is " + std::to_string(last) +
             ", not the completed " + std::to_string(m.committed[g].seq) +
             (allowed.size() > 1 ? " or the running " + std::to_string(allowed[1]->seq) : "");
    }
    if (last == 0) continue;
    const gpm::restore_result r = cp.restore(g);
    if (!r.repaired.empty()) {
      return "group " + std::to_string(g) + " needed a repair: " + r.repaired.front();
    }
    for (const auto& [name, data] : want->chunks) {
      const std::string bad = compare(name, gpm::test::to_host(buffers.at(name)), data);
      if (!bad.empty()) return bad + " (checkpoint " + std::to_string(last) + ")";
    }
  }
  return "";
}

// What the HeteroCheckpoint engine's optimisations did over a workload, so that a test can tell
// they were exercised.
struct engine_counts {
  std::uint32_t redundant = 0, precopied = 0, mispredicted = 0, asynchronous = 0;
};

// The workload's chunks: GPU buffers and what the workload last wrote into them.
struct live_chunks {
  std::map<std::string, gpm::device_buffer<std::uint64_t>> buffers;
  std::map<std::string, words> contents;

  void write(const std::string& name, std::mt19937_64& rng) {
    words& w = contents[name];
    w.resize(spec_of(name).words);
    // Some words or all of them, so that copies differ from the last one in a few lines or all.
    const bool all = rng() % 2 == 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
      if (all || rng() % 8 == 0) w[i] = rng();
    }
    buffers.at(name).copy_from_host(w.data(), w.size());
  }
};

void add_chunk(gpm::checkpointer& cp, checkpoint_model& m, live_chunks& live,
               const std::string& name, std::mt19937_64& rng) {
  const chunk_spec& s = spec_of(name);
  live.buffers.emplace(name, gpm::device_buffer<std::uint64_t>(s.words));
  live.write(name, rng);
  m.adding = name;
  cp.add(name, live.buffers.at(name).data(), s.words, s.group);
  m.added.insert(name);
  m.adding.clear();
}

// Checkpoints group g (synchronously, or asynchronously for the HeteroCheckpoint engine at
// random), with a pre-copy hint for one chunk at random.
void checkpoint_group(gpm::checkpointer& cp, checkpoint_model& m, live_chunks& live,
                      std::uint64_t& completed, std::uint32_t g, engine e, std::mt19937_64& rng,
                      engine_counts& counts) {
  group_checkpoint next{completed + 1, {}};
  for (const std::string& name : m.added) {
    if (spec_of(name).group == g) next.chunks[name] = live.contents.at(name);
  }
  // A pre-copied chunk must not change until the checkpoint, and it does not.
  if (e == engine::hetero && rng() % 2 == 0) cp.precopy(next.chunks.begin()->first);
  m.running.emplace(g, next);
  const bool async = e == engine::hetero && rng() % 2 == 0;
  // The main thread waits at once: an asynchronous checkpoint's crash points are checked on its
  // own thread, which reads the model.
  const gpm::checkpoint_result r = async ? cp.checkpoint_async(g).get() : cp.checkpoint(g);
  ASSERT_EQ(r.seq, next.seq);
  counts.redundant += r.redundant;
  counts.precopied += r.precopied;
  counts.mispredicted += r.mispredicted;
  counts.asynchronous += async;
  m.committed[g] = std::move(next);
  m.running.reset();
  ++completed;
}

struct run_result {
  std::optional<gpm::crash_image_failure> failure;
  gpm::crash_image_stats stats;
  engine_counts counts;
};

// Creates a pool and a checkpoint under a checker that adopts the pool's mapping from its
// creation, then runs `ops` random operations: change a chunk, checkpoint a group, register the
// late chunk, close and reopen everything (as a restarted program would).
run_result check_workload(engine e, std::uint64_t seed, int ops,
                          const std::string& disabled_site = "") {
  gpm::test::scratch_dirs d("cp-crash-image");
  const gpm::pool_options po = pool_options_for(d);
  checkpoint_model m;
  gpm::crash_image_options co;
  co.image_path = d.pool_path("image.pool");
  co.crash_points = kCrashPoints;
  co.seed = seed;
  co.disabled_site = disabled_site;
  gpm::crash_image_checker checker(
      [&](const std::string& image) { return check_image(image, po, e, m); }, co);
  std::mt19937_64 rng(seed);
  engine_counts counts;
  {
    std::optional<gpm::pool> p(gpm::pool::create(kPool, kPoolBytes, kLayout, po));
    std::optional<gpm::checkpointer> cp(
        gpm::checkpointer::create(*p, kCheckpoint, checkpoint_options_for(e)));
    live_chunks live;
    std::uint64_t completed = 0;
    gpm::crash_point("workload.between_ops");
    const bool weights_first = rng() % 2 == 0;
    add_chunk(*cp, m, live, weights_first ? "weights" : "bias", rng);
    gpm::crash_point("workload.between_ops");
    add_chunk(*cp, m, live, weights_first ? "bias" : "weights", rng);
    for (int i = 0; i < ops; ++i) {
      gpm::crash_point("workload.between_ops");
      const unsigned what = rng() % 10;
      const bool has_input = m.added.contains("input");
      if (what < 4) {
        // The input changes rarely, so that the predictor comes to expect it unchanged.
        const std::string name = has_input && rng() % 6 == 0 ? "input"
                                 : rng() % 2 == 0            ? "weights"
                                                             : "bias";
        live.write(name, rng);
      } else if (what < 8) {
        checkpoint_group(*cp, m, live, completed, has_input ? rng() % kGroups : 0, e, rng, counts);
        if (testing::Test::HasFatalFailure()) break;
      } else if (what == 8 && !has_input) {
        add_chunk(*cp, m, live, "input", rng);
      } else if (what == 9) {
        cp.reset();
        p.reset();
        p.emplace(gpm::pool::open(kPool, kLayout, po));
        cp.emplace(gpm::checkpointer::open(*p, kCheckpoint, checkpoint_options_for(e)));
        for (const std::string& name : m.added) {
          const chunk_spec& s = spec_of(name);
          cp->add(name, live.buffers.at(name).data(), s.words, s.group);
        }
      }
    }
  }
  return {checker.failure(), checker.stats(), counts};
}

TEST(CheckpointCrashImage, EveryImageOfBothEnginesRestoresACompletedCheckpoint) {
  const int trials = gpm::test::crash_trials(2);
  const int ops = trials > 2 ? 80 : 40;
  engine_counts hetero;  // the HeteroCheckpoint engine's optimisations, over its trials
  for (const engine e : {engine::gpm, engine::hetero}) {
    for (int t = 0; t < trials; ++t) {
      const std::uint64_t seed = gpm::test::trial_seed(t);
      const run_result r = check_workload(e, seed, ops);
      ASSERT_FALSE(r.failure) << to_string(e) << ", seed " << seed << ": " << r.failure->describe();
      EXPECT_GT(r.stats.explorations, 20u) << to_string(e) << ", seed " << seed;
      EXPECT_GT(r.stats.images, r.stats.explorations) << to_string(e) << ", seed " << seed;
      hetero.redundant += r.counts.redundant;
      hetero.precopied += r.counts.precopied;
      hetero.asynchronous += r.counts.asynchronous;
      std::printf(
          "%s, seed %llu: %llu crash points explored, %llu images, at most %zu dirty "
          "lines\n",
          to_string(e), static_cast<unsigned long long>(seed),
          static_cast<unsigned long long>(r.stats.explorations),
          static_cast<unsigned long long>(r.stats.images), r.stats.most_dirty_lines);
      std::printf("  chunks redundant %u, pre-copied %u, mispredicted %u; %u asynchronous\n",
                  r.counts.redundant, r.counts.precopied, r.counts.mispredicted,
                  r.counts.asynchronous);
      for (const char* site : kSites) {
        EXPECT_TRUE(r.stats.site_hits.contains(site)) << site << " was never reached";
      }
    }
  }
  // The hetero engine's trials (gpm's count zero) took every optimisation's path at least once.
  EXPECT_GT(hetero.redundant, 0u);
  EXPECT_GT(hetero.precopied, 0u);
  EXPECT_GT(hetero.asynchronous, 0u);
}

// Deleting any one persist of the checkpoint protocol must be caught by one engine's workload.
class CheckpointPersistSite : public ::testing::TestWithParam<const char*> {};

TEST_P(CheckpointPersistSite, RemovalIsCaught) {
  bool reached = false;
  bool caught = false;
  for (const engine e : {engine::gpm, engine::hetero}) {
    const run_result r = check_workload(e, 1, 40, GetParam());
    reached = reached || r.stats.site_hits.contains(GetParam());
    if (r.failure) {
      caught = true;
      std::printf("without %s, %s: %s\n", GetParam(), to_string(e), r.failure->describe().c_str());
    } else {
      std::printf("without %s, %s: no image failed (%llu images)\n", GetParam(), to_string(e),
                  static_cast<unsigned long long>(r.stats.images));
    }
  }
  EXPECT_TRUE(reached) << "the workload never reached the site";
  EXPECT_TRUE(caught) << "no crash image failed without " << GetParam();
}

INSTANTIATE_TEST_SUITE_P(Checkpoint, CheckpointPersistSite, ::testing::ValuesIn(kSites),
                         [](const auto& info) { return gpm::test::site_test_name(info.param); });

}  // namespace
