// Recovery of a transactional heap from logs written by hand in the on-media format (what a
// crash leaves behind): replay in sequence order across logs, the first gap or torn record ends
// the replay, records of other epochs or heaps and records already applied are ignored, records
// wrap around the end of their log, discarded records never come back, recovery is idempotent,
// HCL-striped groups replay only when every member is there, live undo records roll back; and
// the merge of many logs, at recovery and while the heap is open (passes in batches, heads
// published only for applied records).
#include <gpm/pool/pool.hpp>
#include <gpm/tx/detail/format.hpp>
#include <gpm/tx/tx_heap.cuh>

#include <atomic>
#include <random>
#include <utility>

#include "tx_test_support.hpp"

namespace {

namespace F = gpm::detail::tx;

constexpr gpm::tx_geometry kGeometry{.words = 64, .logs = 2, .log_bytes = 256};  // 16 chunks

// gpu_replay: recovery (and sync()) replay with kernels, or on the host (tx_options::gpu_replay).
gpm::tx_options options(bool gpu_replay = true) {
  gpm::tx_options o;
  o.mode = gpm::tx_mode::direct;
  o.max_threads = 256;
  o.gpu_replay = gpu_replay;
  return o;
}

using pairs = std::vector<std::pair<std::uint32_t, std::uint32_t>>;

// One reservation's records in a history: a plain record, or a striped group of members.size().
struct planned_unit {
  std::uint32_t log = 0;
  std::uint64_t pos = 0;
  std::uint64_t seq = 0;  // the first member's; the others follow
  bool striped = false;
  std::vector<pairs> members;
  std::uint64_t chunks() const {
    std::uint64_t depth = 0;
    for (const pairs& m : members) depth = std::max(depth, F::record_chunks(m.size()));
    return striped ? depth * members.size() : depth;
  }
};

// A commit history of `records` records over `logs` logs, in sequence order, as warps leave it:
// runs of up to 32 consecutive sequence numbers, each run in one log, either as plain records end
// to end or as one striped group; records of 1 to 3 pairs on words below `words`.
std::vector<planned_unit> plan_history(std::uint64_t records, std::uint32_t logs,
                                       std::uint32_t words, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> next(logs, 0);
  std::vector<planned_unit> units;
  const auto record_pairs = [&] {
    pairs p(1 + rng() % 3);
    for (auto& [w, v] : p) w = static_cast<std::uint32_t>(rng() % words), v = rng() % 1000;
    return p;
  };
  for (std::uint64_t seq = 1; seq <= records;) {
    const std::uint64_t run = std::min<std::uint64_t>(1 + rng() % 32, records - seq + 1);
    const auto log = static_cast<std::uint32_t>(rng() % logs);
    const bool striped = run > 1 && rng() % 2 == 0;
    for (std::uint64_t i = 0; i < run; i += striped ? run : 1) {
      planned_unit u{log, next[log], seq + i, striped, {}};
      for (std::uint64_t m = 0; m < (striped ? run : 1); ++m) u.members.push_back(record_pairs());
      next[log] += u.chunks();
      units.push_back(std::move(u));
    }
    seq += run;
  }
  return units;
}

// The home image after every record of `units` up to seq `last`, from zeros.
std::vector<std::uint32_t> replayed(const std::vector<planned_unit>& units, std::uint64_t last,
                                    std::uint32_t words) {
  std::vector<std::uint32_t> home(words, 0);
  for (const planned_unit& u : units) {
    for (std::uint64_t m = 0; m < u.members.size() && u.seq + m <= last; ++m) {
      for (const auto& [w, v] : u.members[m]) home[w] = v;
    }
  }
  return home;
}

// The heap object of a heap no process has open, read and written like a crash left it.
class media {
 public:
  media(gpm::pool& p, const char* name) : object_(p.host_ptr<char>(p.get(name).offset)) {
    std::memcpy(&header_, object_, sizeof header_);
    layout_ = {header_.words, header_.log_chunks, header_.logs};
  }
  F::root_record root() const {
    const F::root_record* r = roots();
    const bool first = r[0].checksum == F::root_checksum(r[0]);
    const bool second = r[1].checksum == F::root_checksum(r[1]);
    return second && (!first || r[1].seq > r[0].seq) ? r[1] : r[0];
  }
  // Writes the next root record, as the reproducer does.
  void set_applied(std::uint64_t applied) {
    F::root_record r = root();
    r.seq += 1;
    r.applied_seq = applied;
    r.checksum = F::root_checksum(r);
    roots()[r.seq % 2] = r;
  }
  std::uint64_t& head(std::uint32_t log) const {
    return reinterpret_cast<F::log_control*>(object_ + layout_.control_offset())[log].head;
  }
  std::uint32_t* home() const {
    return reinterpret_cast<std::uint32_t*>(object_ + layout_.home_offset());
  }
  // Writes a record of (word, value) pairs at stream position `pos` of `log`; returns the
  // position after it. `epoch` 0: the heap's current epoch; `salt` 0: the heap's own. Only its
  // first `chunks` chunks when `chunks` is not 0 (a record torn by a crash).
  std::uint64_t put(std::uint32_t log, std::uint64_t pos, std::uint64_t seq,
                    const std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs,
                    std::uint64_t epoch = 0, std::uint64_t salt = 0,
                    std::uint64_t chunks_written = 0) const {
    std::vector<std::uint32_t> words, values;
    for (const auto& [w, v] : pairs) words.push_back(w), values.push_back(v);
    F::record_source rec{seq, static_cast<std::uint32_t>(pairs.size()), words.data(), values.data(),
                         0};
    return pos + store(log, pos, rec, 1, epoch, salt, chunks_written);
  }
  // Writes member `rank` of a striped group of `width` records starting at `pos` of `log`.
  void put_member(std::uint32_t log, std::uint64_t pos, std::uint32_t width, std::uint32_t rank,
                  std::uint64_t seq,
                  const std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs) const {
    std::vector<std::uint32_t> words, values;
    for (const auto& [w, v] : pairs) words.push_back(w), values.push_back(v);
    const F::record_source rec{
        seq, static_cast<std::uint32_t>(pairs.size()), words.data(), values.data(), 0, width, rank};
    store(log, pos + rank, rec, width, 0, 0, 0);
  }
  // Writes a live undo record (old values) at `pos` of `log`, striped as lane pos % 32.
  void put_undo(std::uint32_t log, std::uint64_t pos, std::uint64_t seq,
                const std::vector<std::pair<std::uint32_t, std::uint32_t>>& pairs) const {
    std::vector<std::uint32_t> words, values;
    for (const auto& [w, v] : pairs) words.push_back(w), values.push_back(v);
    const F::record_source rec{
        seq, static_cast<std::uint32_t>(pairs.size()), words.data(), values.data(), 0,
        32,  static_cast<std::uint32_t>(pos % 32)};
    store(log, pos, rec, 32, 0, F::undo_salt(F::salt_of(header_)), 0);
  }
  // Writes a planned unit (plain record or striped group).
  void put_unit(const planned_unit& u) const {
    for (std::uint32_t m = 0; m < u.members.size(); ++m) {
      if (u.striped) {
        put_member(u.log, u.pos, static_cast<std::uint32_t>(u.members.size()), m, u.seq + m,
                   u.members[m]);
      } else {
        put(u.log, u.pos, u.seq, u.members[m]);
      }
    }
  }
  // Flips one bit of the slot `slot` of the record at `pos` of `log`.
  void tear(std::uint32_t log, std::uint64_t pos, std::uint64_t slot) const {
    auto* data = reinterpret_cast<std::uint64_t*>(object_ + layout_.log_offset()) +
                 2 * layout_.log_chunks * log;
    data[2 * ((pos + slot / 2) % layout_.log_chunks) + slot % 2] ^= 1ull << 40;
  }

 private:
  F::root_record* roots() const {
    return reinterpret_cast<F::root_record*>(object_ + F::kRootOffset);
  }
  // Stores `rec` (checksummed here) from `pos`, its chunks `stride` positions apart; returns
  // its chunks.
  std::uint64_t store(std::uint32_t log, std::uint64_t pos, F::record_source rec,
                      std::uint64_t stride, std::uint64_t epoch, std::uint64_t salt,
                      std::uint64_t chunks_written) const {
    rec.checksum = F::record_checksum(rec, rec.count,
                                      F::record_seed(salt != 0 ? salt : F::salt_of(header_),
                                                     epoch != 0 ? epoch : root().epoch, log, pos));
    const std::uint64_t chunks = F::record_chunks(rec.count);
    auto* data = reinterpret_cast<std::uint64_t*>(object_ + layout_.log_offset()) +
                 2 * layout_.log_chunks * log;
    // Stored atomically, as kernels do: the reproducer of an open heap may read them meanwhile.
    for (std::uint64_t j = 0; j < (chunks_written != 0 ? chunks_written : chunks); ++j) {
      const std::uint64_t at = (pos + j * stride) % layout_.log_chunks;
      std::atomic_ref<std::uint64_t>(data[2 * at]).store(rec.slot(2 * j));
      std::atomic_ref<std::uint64_t>(data[2 * at + 1]).store(rec.slot(2 * j + 1));
    }
    return chunks;
  }
  char* object_;
  F::heap_header header_{};
  F::heap_layout layout_{};
};

// Creates the heap `h` and closes it again, so that no reproducer runs while a test writes logs.
gpm::pool& with_heap(gpm::pool& p) {
  gpm::tx_heap::create(p, "h", kGeometry, options());
  return p;
}

// Every test runs twice: recovery replaying with kernels, and on the host.
class TxRecovery : public ::testing::TestWithParam<bool> {
 protected:
  gpm::tx_options opts() const { return options(GetParam()); }

  // Opens the heap (recovering it) and returns its working copy. `irregular`: two logs' units
  // stand for one number, or a log's numbers fall, in the kernels' window, where the kernels
  // leave the replay to the host.
  std::vector<std::uint32_t> recover(gpm::tx_recovery* report = nullptr, bool irregular = false) {
    auto heap = gpm::tx_heap::open(pool.get(), "h", kGeometry, opts());
    if (report != nullptr) *report = heap.last_recovery();
    // The kernels replay every record recovery replays, or none.
    EXPECT_EQ(heap.stats().replayed_on_gpu,
              GetParam() && !irregular ? heap.last_recovery().replayed : 0);
    std::vector<std::uint32_t> w(kGeometry.words);
    heap.load(0, w.data(), w.size());
    return w;
  }

  gpm::test::scratch_pool pool{"tx-recovery"};
  media m{with_heap(pool.get()), "h"};
};

TEST_P(TxRecovery, ReplaysTheLogsInSequenceOrderAndOnlyOnce) {
  std::uint64_t at0 = m.put(0, 0, 1, {{0, 10}});
  std::uint64_t at1 = m.put(1, 0, 2, {{0, 20}, {2, 22}});
  at0 = m.put(0, at0, 3, {{0, 30}, {1, 31}});
  m.put(1, at1, 4, {{3, 4}});
  gpm::tx_recovery rec;
  std::vector<std::uint32_t> w = recover(&rec);
  EXPECT_EQ(rec.replayed, 4u);
  EXPECT_EQ(rec.discarded, 0u);
  EXPECT_EQ(rec.applied_seq, 4u);
  EXPECT_EQ((std::vector<std::uint32_t>(w.begin(), w.begin() + 4)),
            (std::vector<std::uint32_t>{30, 31, 22, 4}));
  EXPECT_EQ(m.home()[0], 30u) << "the replay is in the home image";
  EXPECT_EQ(m.root().applied_seq, 4u);
  EXPECT_EQ(m.head(0), 0u) << "a new epoch starts with empty logs";
  // Recovering again finds nothing to do and changes nothing.
  EXPECT_EQ(recover(&rec), w);
  EXPECT_EQ(rec.replayed, 0u);
  EXPECT_EQ(rec.applied_seq, 4u);
}

TEST_P(TxRecovery, StopsAtTheFirstGapAndDropsWhatFollows) {
  std::uint64_t at = m.put(0, 0, 1, {{0, 1}});
  at = m.put(0, at, 2, {{1, 2}});
  m.put(1, 0, 4, {{3, 4}});
  m.put(1, 4, 5, {{4, 5}});  // a record after a hole in log 1: never reached
  m.put(0, at, 5, {{5, 5}});
  gpm::tx_recovery rec;
  const std::vector<std::uint32_t> w = recover(&rec);
  EXPECT_EQ(rec.replayed, 2u);
  EXPECT_EQ(rec.discarded, 2u);  // seq 4 of log 1, seq 5 of log 0
  EXPECT_EQ(rec.applied_seq, 2u);
  EXPECT_EQ((std::vector<std::uint32_t>(w.begin(), w.begin() + 6)),
            (std::vector<std::uint32_t>{1, 2, 0, 0, 0, 0}));
  // A later recovery must not find them: they belong to the epoch recovery ended.
  m.put(0, 0, 3, {{2, 3}});  // the new epoch's seq 3, where the old records lay
  EXPECT_EQ(recover(&rec)[2], 3u);
  EXPECT_EQ(rec.replayed, 1u);
  EXPECT_EQ(rec.discarded, 0u);
}

TEST_P(TxRecovery, ATornRecordEndsTheReplay) {
  for (const std::uint64_t slot : {0, 1, 2, 3}) {  // the head, the pairs, the checksum
    SCOPED_TRACE("torn slot " + std::to_string(slot));
    const std::string name = "t" + std::to_string(slot);
    gpm::tx_heap::create(pool.get(), name, kGeometry, opts());
    media t(pool.get(), name.c_str());
    const std::uint64_t torn = t.put(0, 0, 1, {{0, 1}});
    const std::uint64_t at = t.put(0, torn, 2, {{1, 2}, {2, 2}});
    t.put(0, at, 4, {{4, 4}});
    t.put(1, 0, 3, {{3, 3}});
    t.tear(0, torn, slot);
    auto heap = gpm::tx_heap::open(pool.get(), name, kGeometry, opts());
    EXPECT_EQ(heap.last_recovery().replayed, 1u);
    EXPECT_EQ(heap.last_recovery().discarded, 1u);  // seq 3; seq 4 lies behind the torn one
    std::vector<std::uint32_t> w(5);
    heap.load(0, w.data(), w.size());
    EXPECT_EQ(w, (std::vector<std::uint32_t>{1, 0, 0, 0, 0}));
  }
}

// Position 22 of a 16-chunk log is the chunk of position 6 one lap on. A whole record of the lap
// before (seq 293 at 6) never validates as one at 22: its checksum's seed mixes the position
// in. Nor does a record at 22 (seq 309) that got only its first chunk (head and checksum) before
// a crash, its second still the old record's pair: with 22 ^ 309 == 6 ^ 293, a seed that left
// the position unmixed let such a chunk validate when version 1.x kept checksums last.
TEST_P(TxRecovery, AStaleChunkOneLapBackNeverCompletesANewRecord) {
  ASSERT_EQ(22u ^ 309u, 6u ^ 293u);
  m.put(0, 6, 293, {{5, 2}});
  m.head(0) = 22;
  m.set_applied(308);
  gpm::tx_recovery rec;
  recover(&rec);
  EXPECT_EQ(rec.replayed, 0u);
  EXPECT_EQ(rec.applied_seq, 308u);
  m.put(0, 6, 293, {{5, 2}});
  m.put(0, 22, 309, {{5, 3}}, 0, 0, 1);
  m.head(0) = 22;
  recover(&rec);
  EXPECT_EQ(rec.replayed, 0u);
  EXPECT_EQ(rec.applied_seq, 308u);
}

// Log 0: a group of three records (2, 3 and 3 chunks: 3 rows of 3 chunks), then a plain record
// after it. Log 1: a group of two whose second member never got written.
TEST_P(TxRecovery, StripedGroupsReplayOnlyWhenEveryMemberIsThere) {
  m.put_member(0, 0, 3, 0, 1, {{0, 1}});
  m.put_member(0, 0, 3, 2, 3, {{2, 3}, {0, 3}, {5, 3}});
  m.put_member(0, 0, 3, 1, 2, {{1, 2}, {0, 2}, {4, 2}});
  m.put(0, 9, 4, {{3, 4}});
  m.put_member(1, 0, 2, 0, 5, {{6, 5}});
  gpm::tx_recovery rec;
  const std::vector<std::uint32_t> w = recover(&rec);
  EXPECT_EQ(rec.replayed, 4u);
  EXPECT_EQ(rec.applied_seq, 4u);
  EXPECT_EQ((std::vector<std::uint32_t>(w.begin(), w.begin() + 7)),
            (std::vector<std::uint32_t>{3, 2, 3, 4, 2, 3, 0}));
}

// A sequence number is one commit's: two logs whose units both stand for it (only crafted or
// damaged logs can hold that, each checksum valid) are no commit order, and the replay ends
// before it, whichever log it reads first (the kernels find the number placed twice and leave
// the replay to the host's merge, which stops there).
TEST_P(TxRecovery, ANumberTwoLogsClaimEndsTheReplayBeforeIt) {
  std::uint64_t at = m.put(0, 0, 1, {{0, 1}});
  at = m.put(0, at, 2, {{1, 2}});
  m.put(0, at, 3, {{2, 3}});
  at = m.put(1, 0, 2, {{1, 99}});
  m.put(1, at, 4, {{3, 4}});
  gpm::tx_recovery rec;
  const std::vector<std::uint32_t> w = recover(&rec, true);
  EXPECT_EQ(rec.applied_seq, 1u);
  EXPECT_EQ(rec.replayed, 1u);
  EXPECT_EQ(rec.discarded, 4u);
  EXPECT_EQ((std::vector<std::uint32_t>(w.begin(), w.begin() + 4)),
            (std::vector<std::uint32_t>{1, 0, 0, 0}));
  gpm::tx_recovery again;
  EXPECT_EQ(recover(&again, true), w);
  EXPECT_EQ(again.applied_seq, 1u);
  EXPECT_EQ(again.replayed, 0u);
}

// The same where the units overlap in part: two striped groups share the first one's last
// number; its members before it are a prefix and replay.
// Units at or below the applied seq must not stand for their logs in the merge: here log 0's
// first unit (seq 1) and log 1's (2-3) are applied already, and log 1's second unit claims seq 8,
// as log 0's second group does (crafted). The replay ends before 8 on both paths; the host's
// merge, following log 0 with log 1's applied unit as the lowest other, used to apply 8-10 (found
// by TxRecoveryPaths.KernelsAndHostRecoverTheSameStateFromAnyValidRecords).
TEST_P(TxRecovery, ANumberALaterUnitSharesEndsTheReplayBehindAppliedUnits) {
  m.put(0, 0, 1, {{0, 1}});
  for (std::uint32_t r = 0; r < 3; ++r) m.put_member(0, 2, 3, r, 5 + r, {{2 + r, 5 + r}});
  for (std::uint32_t r = 0; r < 2; ++r) m.put_member(0, 8, 2, r, 8 + r, {{5 + r, 8 + r}});
  m.put(0, 12, 10, {{7, 10}});
  for (std::uint32_t r = 0; r < 2; ++r) m.put_member(1, 0, 2, r, 2 + r, {{0, 2 + r}});
  m.put(1, 4, 8, {{1, 8}});
  m.set_applied(4);
  gpm::tx_recovery rec;
  const std::vector<std::uint32_t> w = recover(&rec, true);
  EXPECT_EQ(rec.replayed, 3u);
  EXPECT_EQ(rec.applied_seq, 7u);
  EXPECT_EQ((std::vector<std::uint32_t>(w.begin(), w.begin() + 8)),
            (std::vector<std::uint32_t>{0, 0, 5, 6, 7, 0, 0, 0}));
}

TEST_P(TxRecovery, UnitsOverlappingInPartReplayUpToTheirFirstSharedNumber) {
  m.put(0, 0, 1, {{0, 1}});
  m.put_member(0, 2, 3, 0, 2, {{1, 2}});
  m.put_member(0, 2, 3, 1, 3, {{2, 3}});
  m.put_member(0, 2, 3, 2, 4, {{3, 4}});
  m.put_member(1, 0, 2, 0, 4, {{4, 4}});
  m.put_member(1, 0, 2, 1, 5, {{5, 5}});
  m.put(1, 4, 6, {{6, 6}});
  gpm::tx_recovery rec;
  const std::vector<std::uint32_t> w = recover(&rec, true);
  EXPECT_EQ(rec.applied_seq, 3u);
  EXPECT_EQ(rec.replayed, 3u);
  EXPECT_EQ(rec.discarded, 4u) << "the first group's member 4, the second group, record 6";
  EXPECT_EQ((std::vector<std::uint32_t>(w.begin(), w.begin() + 7)),
            (std::vector<std::uint32_t>{1, 2, 3, 0, 0, 0, 0}));
}

// Replay windows smaller than what the logs hold (tx_options::replay_window): with both logs
// standing for numbers 1..6, the kernels of a 4-number window place twice as many records as
// it has slots and must read none past it; a group reaching past the window still stands for
// its first number, which another log's record shares. Both paths recover the same state.
TEST_P(TxRecovery, TinyReplayWindowsFindNumbersTwoLogsShare) {
  gpm::tx_options o = opts();
  o.replay_window = 4;
  const auto recover_small = [&](const std::string& name) {
    auto heap = gpm::tx_heap::open(pool.get(), name, kGeometry, o);
    EXPECT_EQ(heap.stats().replayed_on_gpu, 0u) << "irregular windows go to the host";
    std::vector<std::uint32_t> w(8);
    heap.load(0, w.data(), w.size());
    return std::make_pair(heap.last_recovery(), w);
  };
  gpm::tx_heap::create(pool.get(), "twice", kGeometry, o);
  {
    media t(pool.get(), "twice");
    for (std::uint32_t log = 0; log < 2; ++log) {
      std::uint64_t at = 0;
      for (std::uint32_t n = 1; n <= 6; ++n) at = t.put(log, at, n, {{n, 10 * log + n}});
    }
  }
  const auto [twice, w1] = recover_small("twice");
  EXPECT_EQ(twice.applied_seq, 0u);
  EXPECT_EQ(twice.replayed, 0u);
  EXPECT_EQ(twice.discarded, 12u);
  EXPECT_EQ(w1, std::vector<std::uint32_t>(8, 0));

  gpm::tx_heap::create(pool.get(), "group", kGeometry, o);
  {
    media t(pool.get(), "group");
    std::uint64_t at = 0;
    for (std::uint32_t n = 1; n <= 3; ++n) at = t.put(0, at, n, {{n, n}});
    for (std::uint32_t r = 0; r < 3; ++r) t.put_member(0, at, 3, r, 4 + r, {{4 + r, 4 + r}});
    t.put(1, 0, 4, {{7, 99}});
  }
  const auto [group, w2] = recover_small("group");
  EXPECT_EQ(group.applied_seq, 3u);
  EXPECT_EQ(group.replayed, 3u);
  EXPECT_EQ(w2, (std::vector<std::uint32_t>{0, 1, 2, 3, 0, 0, 0, 0}));
}

// An undo heap whose commits were cut short: live undo records restore the old values, a retired
// (here: torn) one and a redo record do nothing, and the next recovery finds nothing.
TEST_P(TxRecovery, UndoEpochsRollBackLiveUndoRecordsOnly) {
  constexpr gpm::tx_geometry kUndo{.words = 64, .logs = 2, .log_bytes = 4096};
  gpm::tx_options o = opts();
  o.mode = gpm::tx_mode::undo;
  {
    auto heap = gpm::tx_heap::create(pool.get(), "u", kUndo, o);
    const std::vector<std::uint32_t> initial{1, 2, 3, 4};
    heap.store(0, initial.data(), initial.size());
  }
  media u(pool.get(), "u");
  EXPECT_EQ(u.root().undo, 1u);
  std::uint32_t* home = u.home();
  home[0] = 10, home[1] = 11, home[2] = 12;  // new values of commits a crash interrupted
  u.put_undo(0, 0, 7, {{0, 1}, {1, 2}});
  u.put_undo(1, 37, 8, {{2, 99}});
  u.tear(1, 37, 0);
  u.put(0, 100, 1, {{3, 55}});  // a redo record: never applied in an undo epoch
  const auto recover_undo = [&](gpm::tx_recovery& rec) {
    auto heap = gpm::tx_heap::open(pool.get(), "u", kUndo, o);
    rec = heap.last_recovery();
    std::vector<std::uint32_t> w(4);
    heap.load(0, w.data(), w.size());
    return w;
  };
  gpm::tx_recovery rec;
  EXPECT_EQ(recover_undo(rec), (std::vector<std::uint32_t>{1, 2, 12, 4}));
  EXPECT_EQ(rec.rolled_back, 1u);
  EXPECT_EQ(rec.replayed, 0u);
  EXPECT_EQ(recover_undo(rec), (std::vector<std::uint32_t>{1, 2, 12, 4}));
  EXPECT_EQ(rec.rolled_back, 0u) << "the new epoch retires every undo record";
}

TEST_P(TxRecovery, IgnoresRecordsOfOtherEpochsAndOtherHeaps) {
  const std::uint64_t epoch = m.root().epoch;
  m.put(0, 0, 1, {{0, 1}}, epoch - 1);
  m.put(1, 0, 1, {{1, 1}}, 0, F::salt_of(F::heap_header{}) ^ 0x5a5a);
  gpm::tx_recovery rec;
  const std::vector<std::uint32_t> w = recover(&rec);
  EXPECT_EQ(rec.replayed, 0u);
  EXPECT_EQ(rec.discarded, 0u);
  EXPECT_EQ(w[0] + w[1], 0u);
}

TEST_P(TxRecovery, RecordsWrapAroundTheEndOfTheirLog) {
  // Log 0's head stands 1 chunk before the end: the record's other chunks lie at its start.
  m.head(0) = 31;  // 16-chunk log: position 31 is its last chunk, 32 its first
  const std::uint64_t at = m.put(0, 31, 1, {{7, 70}, {8, 80}, {9, 90}, {10, 100}});
  m.put(0, at, 2, {{11, 110}});
  gpm::tx_recovery rec;
  const std::vector<std::uint32_t> w = recover(&rec);
  EXPECT_EQ(rec.replayed, 2u);
  EXPECT_EQ(w[7] + w[8] + w[9] + w[10] + w[11], 450u);
}

// A record's head holds its seq's low 40 bits; readers take the number nearest the applied seq.
TEST(TxFormat, ARecordsSeqIsTheNumberNearestTheAppliedSeq) {
  const std::uint64_t wrap = std::uint64_t{1} << 40;
  for (const std::uint64_t near :
       {std::uint64_t{0}, std::uint64_t{5}, wrap - 3, wrap, 7 * wrap + 11, ~std::uint64_t{0} - 2}) {
    for (const std::int64_t d :
         {std::int64_t{0}, std::int64_t{1}, std::int64_t{-1}, std::int64_t{1000},
          std::int64_t{-1000}, (std::int64_t{1} << 39) - 1, -(std::int64_t{1} << 39)}) {
      const std::uint64_t seq = near + static_cast<std::uint64_t>(d);
      EXPECT_EQ(F::seq_near(F::head_slot(seq, 3, 0, 0), near), seq) << near << " " << d;
    }
  }
  // The head's other fields do not leak into the number.
  const std::uint64_t head = F::head_slot(wrap + 9, F::kMaxPairs, 32, 31);
  EXPECT_EQ(F::seq_near(head, wrap), wrap + 9);
  EXPECT_EQ(F::count_of(head), F::kMaxPairs);
  EXPECT_EQ(F::width_of(head), 32u);
  EXPECT_EQ(F::rank_of(head), 31u);
  // A two-word write set takes two chunks (32 bytes): head and pair, pair and checksum.
  EXPECT_EQ(F::record_chunks(2), 2u);
  EXPECT_EQ(F::record_chunks(1), 2u);
  EXPECT_EQ(F::record_chunks(3), 3u);
}

// A replay runs on across a multiple of 2^40 (where the heads' low bits start again at 0), and
// still passes over a record at or below the applied seq.
TEST_P(TxRecovery, ReplaysAcrossTheSeqBitsOfTheHeads) {
  const std::uint64_t applied = (std::uint64_t{1} << 40) - 2;
  std::uint64_t at = m.put(0, 0, applied, {{3, 9}});  // applied before the crash
  at = m.put(0, at, applied + 1, {{0, 1}});
  at = m.put(0, at, applied + 2, {{1, 2}});  // 2^40: its head's seq bits are 0
  m.put(1, 0, applied + 3, {{2, 3}, {0, 4}});
  m.home()[3] = 7;
  m.set_applied(applied);
  gpm::tx_recovery rec;
  const std::vector<std::uint32_t> w = recover(&rec);
  EXPECT_EQ(rec.replayed, 3u);
  EXPECT_EQ(rec.applied_seq, applied + 3);
  EXPECT_EQ((std::vector<std::uint32_t>(w.begin(), w.begin() + 4)),
            (std::vector<std::uint32_t>{4, 2, 3, 7}));
}

TEST_P(TxRecovery, SkipsRecordsTheHomeImageAlreadyHas) {
  // A crash after the reproducer applied seq 1 and 2 and flipped the root, before it freed
  // their log space: the home image has them; replaying them again would undo seq 3's write.
  std::uint64_t at = m.put(0, 0, 1, {{0, 1}});
  at = m.put(0, at, 2, {{0, 2}});
  at = m.put(0, at, 3, {{0, 3}, {1, 3}});
  m.put(0, at, 4, {{1, 4}});
  m.home()[0] = 2;
  m.set_applied(2);
  gpm::tx_recovery rec;
  const std::vector<std::uint32_t> w = recover(&rec);
  EXPECT_EQ(rec.replayed, 2u);
  EXPECT_EQ(rec.applied_seq, 4u);
  EXPECT_EQ(w[0], 3u);
  EXPECT_EQ(w[1], 4u);
}

// A group whose sequence numbers wrap around 2^64 (its checksums valid: crafted, not a crash's)
// ends log 0's replay, on the host and in the kernels alike.
TEST_P(TxRecovery, AGroupWhoseSequenceNumbersWrapIsNotTrusted) {
  const std::uint64_t at = m.put(0, 0, 1, {{0, 1}});
  m.put_member(0, at, 2, 0, ~std::uint64_t{0}, {{2, 7}});
  m.put_member(0, at, 2, 1, 0, {{3, 7}});
  m.put(0, at + 4, 2, {{1, 2}});
  gpm::tx_recovery rec;
  const std::vector<std::uint32_t> w = recover(&rec);
  EXPECT_EQ(rec.replayed, 1u);
  EXPECT_EQ(rec.applied_seq, 1u);
  EXPECT_EQ((std::vector<std::uint32_t>(w.begin(), w.begin() + 4)),
            (std::vector<std::uint32_t>{1, 0, 0, 0}));
}

// Log 1's third record goes back in the order (crafted): the host's merge passes it over once
// the prefix is beyond it and takes seq 2 from log 0; the kernels, finding a log whose numbers
// fall, leave the window to the host.
TEST_P(TxRecovery, ARecordOutOfItsLogsOrderIsNotApplied) {
  std::uint64_t at = m.put(1, 0, 1, {{0, 1}});
  at = m.put(1, at, 3, {{2, 3}});
  m.put(1, at, 2, {{1, 9}});
  m.put(0, 0, 2, {{1, 2}});
  gpm::tx_recovery rec;
  const std::vector<std::uint32_t> w = recover(&rec, true);
  EXPECT_EQ(rec.replayed, 3u);
  EXPECT_EQ(rec.applied_seq, 3u);
  EXPECT_EQ((std::vector<std::uint32_t>(w.begin(), w.begin() + 3)),
            (std::vector<std::uint32_t>{1, 2, 3}));
}

TEST_P(TxRecovery, AValidRecordNamingAWordOutsideTheHeapIsNotTrusted) {
  const std::uint64_t at = m.put(0, 0, 1, {{0, 1}});
  m.put(0, at, 2, {{64, 1}});  // word 64 of 64
  gpm::tx_recovery rec;
  recover(&rec);
  EXPECT_EQ(rec.replayed, 1u);
  EXPECT_EQ(rec.applied_seq, 1u);
}

// Recovery after real transactions whose records the reproducer has not applied yet: a
// kernel's commits are replayed from the logs alone.
TEST_P(TxRecovery, ReplaysWhatKernelsLeftInTheLogs) {
  gpm::test::tx::atm w{.accounts = 8, .transactions = 300, .seed = 5};
  std::vector<std::uint32_t> expect;
  {
    auto heap =
        gpm::tx_heap::create(pool.get(), "bank", {.words = w.words(), .logs = 4}, opts());
    const auto init = w.initial(100);
    heap.store(0, init.data(), init.size());
    gpm::device_buffer<std::uint64_t> seq(w.transactions);
    gpm::device_buffer<gpm::tx_status> status(w.transactions);
    gpm::test::tx::launch_atm<1>(heap, w, 0, w.transactions, 4, 32, {seq.data(), status.data()});
    heap.sync();
    expect.resize(w.words());
    heap.load(0, expect.data(), expect.size());
    // Undo the reproducer's work: back to the initial home image and root, logs as written.
    media b(pool.get(), "bank");
    std::memcpy(b.home(), init.data(), init.size() * sizeof init[0]);
    b.set_applied(0);
    for (std::uint32_t log = 0; log < 4; ++log) b.head(log) = 0;
  }
  auto heap = gpm::tx_heap::open(pool.get(), "bank", opts());
  EXPECT_EQ(heap.last_recovery().replayed, w.transactions);
  std::vector<std::uint32_t> got(w.words());
  heap.load(0, got.data(), got.size());
  EXPECT_EQ(got, expect);
}

constexpr gpm::tx_geometry kMany{.words = 4096, .logs = 16, .log_bytes = 512 << 10};

// Where each log's stream stands once every unit of `units` below seq `gap` is applied: at its
// first unit at or above `gap`, else at its end.
std::vector<std::uint64_t> heads_at(const std::vector<planned_unit>& units, std::uint64_t gap) {
  std::vector<std::uint64_t> heads(kMany.logs, 0);
  std::vector<bool> stopped(kMany.logs, false);
  for (const planned_unit& u : units) {
    if (u.seq >= gap) stopped[u.log] = true;
    if (!stopped[u.log]) heads[u.log] = u.pos + u.chunks();
  }
  return heads;
}

// 3000 records over 16 logs, plain and striped, one unit torn: recovery merges the logs up to it,
// counts what lies beyond as discarded, and a second recovery changes nothing.
TEST_P(TxRecovery, MergesManyInterleavedLogsUpToATornUnit) {
  gpm::tx_heap::create(pool.get(), "many", kMany, opts());
  media mm(pool.get(), "many");
  const std::vector<planned_unit> units = plan_history(3000, kMany.logs, kMany.words, 7);
  for (const planned_unit& u : units) mm.put_unit(u);
  const auto torn = std::find_if(units.begin(), units.end(),
                                 [](const planned_unit& u) { return u.seq >= 1500 && u.striped; });
  ASSERT_NE(torn, units.end());
  mm.tear(torn->log, torn->pos, 0);
  std::uint64_t beyond = 0;  // valid records after the gap, in logs that reach past it
  for (const planned_unit& u : units) {
    if (u.seq > torn->seq && u.log != torn->log) beyond += u.members.size();
  }
  const auto open_many = [&] {
    auto heap = gpm::tx_heap::open(pool.get(), "many", kMany, opts());
    std::vector<std::uint32_t> w(kMany.words);
    heap.load(0, w.data(), w.size());
    return std::make_pair(heap.last_recovery(), w);
  };
  const auto [rec, w] = open_many();
  EXPECT_EQ(rec.replayed, torn->seq - 1);
  EXPECT_EQ(rec.applied_seq, torn->seq - 1);
  EXPECT_EQ(rec.discarded, beyond);
  EXPECT_EQ(w, replayed(units, torn->seq - 1, kMany.words));
  const auto [again, w2] = open_many();
  EXPECT_EQ(again.replayed, 0u);
  EXPECT_EQ(again.discarded, 0u);
  EXPECT_EQ(w2, w);
}

// An open heap's reproducer, finding more records than one pass applies at once, over 16 logs
// with a unit missing: it applies exactly the prefix before the gap, frees in each log only the
// space of applied records, and goes on once the unit arrives.
TEST_P(TxRecovery, AnOpenHeapAppliesThePrefixInPassesAndFreesOnlyAppliedSpace) {
  auto heap = gpm::tx_heap::create(pool.get(), "live", kMany, opts());
  media lm(pool.get(), "live");
  constexpr std::uint64_t kRecords = 100'000;
  const std::vector<planned_unit> units = plan_history(kRecords, kMany.logs, kMany.words, 11);
  const auto gap = std::find_if(units.begin(), units.end(),
                                [](const planned_unit& u) { return u.seq >= 90'000; });
  ASSERT_NE(gap, units.end());
  // Seq 1 last: until it is there nothing applies, then more than a pass's batch at once.
  for (auto u = units.begin() + 1; u != units.end(); ++u) {
    if (u != gap) lm.put_unit(*u);
  }
  EXPECT_EQ(heap.durable_seq(), 0u);
  lm.put_unit(units.front());
  const auto durable_until = [&](std::uint64_t seq) {
    for (int i = 0; i < 1000 && heap.durable_seq() < seq; ++i) {
    }
    return heap.durable_seq();
  };
  EXPECT_EQ(durable_until(gap->seq - 1), gap->seq - 1);
  EXPECT_EQ(lm.root().applied_seq, gap->seq - 1);
  const std::vector<std::uint32_t> prefix = replayed(units, gap->seq - 1, kMany.words);
  EXPECT_TRUE(std::equal(prefix.begin(), prefix.end(), lm.home()));
  const std::vector<std::uint64_t> heads = heads_at(units, gap->seq);
  for (std::uint32_t log = 0; log < kMany.logs; ++log) EXPECT_EQ(lm.head(log), heads[log]) << log;

  lm.put_unit(*gap);
  EXPECT_EQ(durable_until(kRecords), kRecords);
  const std::vector<std::uint32_t> all = replayed(units, kRecords, kMany.words);
  EXPECT_TRUE(std::equal(all.begin(), all.end(), lm.home()));
  const std::vector<std::uint64_t> ends = heads_at(units, kRecords + 1);
  for (std::uint32_t log = 0; log < kMany.logs; ++log) EXPECT_EQ(lm.head(log), ends[log]) << log;
}

// durable_seq() applies records the replay kernels cannot see (past the logs' device tails: here
// written by the host, as a kernel of another heap object would leave them) with a pass of its
// own, not only the reproducer thread's, which passes only while nobody waits for the heap's
// mutex: polling durable_seq() in a loop starved it on an H100 (the open-heap test above, its
// kernels side). Without the thread, the caller's pass is the only one.
TEST_P(TxRecovery, DurableSeqAppliesWhatTheKernelsCannotSee) {
  gpm::tx_options o = opts();
  o.background_apply = false;
  auto heap = gpm::tx_heap::create(pool.get(), "quiet", kGeometry, o);
  media q(pool.get(), "quiet");
  const std::uint64_t at = q.put(0, 0, 1, {{0, 7}});
  q.put(1, 0, 2, {{1, 8}});
  q.put(0, at, 3, {{0, 9}});
  EXPECT_EQ(heap.durable_seq(), 3u);
  EXPECT_EQ(q.home()[0], 9u) << "applied to the home image";
  EXPECT_EQ(q.home()[1], 8u);
}

// Logs crafted at random with valid checksums (units out of their log's order, numbers two logs
// share, overlapping groups, an applied root above some of them, kernels' windows of 1 to 8
// numbers or as many as the logs hold): the replay kernels and the host's merge recover the same state from
// each, and a second recovery changes nothing.
TEST(TxRecoveryPaths, KernelsAndHostRecoverTheSameStateFromAnyValidRecords) {
  constexpr gpm::tx_geometry kSmall{.words = 16, .logs = 3, .log_bytes = 512};  // 32 chunks
  constexpr std::uint64_t kChunks = 32;  // per log; the kernels' window: 3 * 32 / 2 numbers
  gpm::test::scratch_pool pool{"tx-recovery-paths"};
  std::mt19937_64 rng(2026);
  std::uint64_t replayed = 0, deferred = 0;
  for (int trial = 0; trial < 400; ++trial) {
    SCOPED_TRACE(trial);
    std::vector<std::function<void(media&)>> writes;  // the same records into both heaps
    // Mostly a history (numbers handed out in turn to random logs), one unit in four at a
    // number drawn at random (shared, out of its log's order, or past a gap).
    std::uint64_t next = 1;
    std::vector<std::uint64_t> pos(kSmall.logs, 0);
    for (int n = 0; n < 14; ++n) {
      const auto log = static_cast<std::uint32_t>(rng() % kSmall.logs);
      const std::uint64_t seq = rng() % 4 != 0 ? next : 1 + rng() % (next + 3);
      const bool group = rng() % 3 == 0;  // else a plain record
      const std::uint32_t width = group ? 2 + static_cast<std::uint32_t>(rng() % 3) : 1;
      std::vector<pairs> members(width);
      for (pairs& m : members) {
        for (std::uint64_t k = 1 + rng() % 2; k-- > 0;) {
          m.push_back({static_cast<std::uint32_t>(rng() % kSmall.words),
                       static_cast<std::uint32_t>(rng() % 1000)});
        }
      }
      const std::uint64_t chunks = F::record_chunks(2) * width;
      const std::uint64_t at = pos[log];
      if (at + chunks > kChunks) continue;
      if (group) {
        writes.push_back([=](media& t) {
          for (std::uint32_t r = 0; r < width; ++r) {
            t.put_member(log, at, width, r, seq + r, members[r]);
          }
        });
      } else {
        writes.push_back([=](media& t) { t.put(log, at, seq, members[0]); });
      }
      next = std::max(next, seq + width);
      pos[log] += chunks;
    }
    const std::uint64_t applied = rng() % 3 == 0 ? rng() % 6 : 0;
    const std::string names[2] = {"kernels", "host"};
    gpm::tx_recovery rec[2];
    std::vector<std::uint32_t> home[2];
    // The kernels' window: what the logs can hold (48 numbers), or a few numbers, so that units
    // and shared numbers fall across windows.
    constexpr std::uint64_t kWindows[] = {1 << 20, 1, 2, 3, 5, 8};
    gpm::tx_options side_options[2] = {options(true), options(false)};
    side_options[0].replay_window = kWindows[rng() % std::size(kWindows)];
    for (int side = 0; side < 2; ++side) {
      gpm::tx_heap::create(pool.get(), names[side], kSmall, side_options[side]);
      media t(pool.get(), names[side].c_str());
      for (const auto& w : writes) w(t);
      if (applied != 0) t.set_applied(applied);
      for (int round = 0; round < 2; ++round) {
        auto heap = gpm::tx_heap::open(pool.get(), names[side], kSmall, side_options[side]);
        std::vector<std::uint32_t> w(kSmall.words);
        heap.load(0, w.data(), w.size());
        if (round == 0) {
          rec[side] = heap.last_recovery();
          home[side] = w;
          deferred += side == 0 && heap.stats().replayed_on_gpu < rec[side].replayed ? 1 : 0;
        } else {
          EXPECT_EQ(heap.last_recovery().replayed, 0u);
          EXPECT_EQ(heap.last_recovery().applied_seq, rec[side].applied_seq);
          EXPECT_EQ(w, home[side]);
        }
      }
    }
    EXPECT_EQ(rec[0].applied_seq, rec[1].applied_seq);
    EXPECT_EQ(rec[0].replayed, rec[1].replayed);
    EXPECT_EQ(rec[0].discarded, rec[1].discarded);
    EXPECT_EQ(home[0], home[1]);
    replayed += rec[1].replayed;
    for (const std::string& name : names) pool.get().free(name);
  }
  // The histories replay records, and in some the kernels find an irregular window and leave
  // records to the host.
  EXPECT_GT(replayed, 600u);
  EXPECT_GT(deferred, 10u);
}

INSTANTIATE_TEST_SUITE_P(Replay, TxRecovery, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return std::string(i.param ? "kernels" : "host");
                         });

}  // namespace
