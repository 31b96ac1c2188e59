// Unit tests of the YCSB comparison indexes (bench/workloads/ycsb): Clevel-GPM (per-thread,
// lock-free), SlabHash-GPM (warp-cooperative, undo-logged), the CPU-assisted hash and the GPHash
// adapter (mixed batches through gpm::gphash_ref, tiles of 32 and 1, with BktCache), each with
// 8- and 32-byte keys and 128-byte values, and 32-byte keys with 32-byte values, against a
// reference map: random batches of every operation, per-operation
// status and version, final content, reopening, full tables, and header validation.
#include <gpm/platform/kernel.cuh>
#include <gpm/pool/pool.hpp>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <unordered_map>
#include <vector>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "hash_baselines_support.hpp"
#include "workloads/ycsb/clevel_index.cuh"
#include "workloads/ycsb/cpu_hash.hpp"
#include "workloads/ycsb/gphash_index.cuh"
#include "workloads/ycsb/slab_index.cuh"
#include "workloads/ycsb/ycsb_ops.cuh"

namespace {

using namespace gpmbench::ycsb;
using gpmbench::geometry;

constexpr char kLayout[] = "hash-baselines-test";
constexpr geometry kLaunch{4, 64};

// One adapter per index: create and reopen in a pool; the test body is shared.
template <class Key, class Value = kv_value>
struct clevel_gpu {
  using index = clevel_index<Key, Value>;
  static std::uint64_t pool_bytes(std::uint64_t k, std::uint64_t r) {
    return index::pool_bytes(k, r);
  }
  static std::unique_ptr<index> create(gpm::pool& p, std::uint64_t k, std::uint64_t r) {
    return std::make_unique<index>(index::create(p, "t", k, r, kLaunch));
  }
  static std::unique_ptr<index> open(gpm::pool& p) {
    return std::make_unique<index>(index::open(p, "t", kLaunch));
  }
};
template <class Key, class Value = kv_value>
struct slab_gpu {
  using index = slab_index<Key, Value>;
  static std::uint64_t pool_bytes(std::uint64_t k, std::uint64_t r) {
    return index::pool_bytes(k, r, kLaunch.blocks * kLaunch.threads / 32);
  }
  static std::unique_ptr<index> create(gpm::pool& p, std::uint64_t k, std::uint64_t r) {
    return std::make_unique<index>(index::create(p, "t", k, r, kLaunch));
  }
  static std::unique_ptr<index> open(gpm::pool& p) {
    return std::make_unique<index>(index::open(p, "t", kLaunch));
  }
};
template <class Key, class Value = kv_value>
struct cpu_assisted {
  using index = cpu_hash_index<Key, Value>;
  static std::uint64_t pool_bytes(std::uint64_t k, std::uint64_t r) {
    return index::pool_bytes(k, r);
  }
  static std::unique_ptr<index> create(gpm::pool& p, std::uint64_t k, std::uint64_t r) {
    return index::create(p, "t", k, r, 4096, 2);
  }
  static std::unique_ptr<index> open(gpm::pool& p) { return index::open(p, "t", 4096, 2); }
};

template <class Key, unsigned Cg, class Value = kv_value>
struct gphash_adapter {
  using index = gphash_index<Key, Value>;
  static gphash_variant variant() {
    gphash_variant v;
    v.cg_size = Cg;
    v.reload_every_ops = 256;  // reload the bucket cache often: cached buckets are exercised
    return v;
  }
  static std::uint64_t pool_bytes(std::uint64_t k, std::uint64_t) { return index::pool_bytes(k); }
  static std::unique_ptr<index> create(gpm::pool& p, std::uint64_t k, std::uint64_t) {
    return std::make_unique<index>(p, k, kLaunch, variant());
  }
  static std::unique_ptr<index> open(gpm::pool& p) { return index::open(p, kLaunch, variant()); }
};

template <class Adapter>
class HashBaselines : public ::testing::Test {};
using Adapters =
    ::testing::Types<clevel_gpu<key8>, clevel_gpu<key32>, clevel_gpu<key32, value32>,
                     slab_gpu<key8>, slab_gpu<key32>, slab_gpu<key32, value32>, cpu_assisted<key8>,
                     cpu_assisted<key32>, cpu_assisted<key32, value32>, gphash_adapter<key8, 32>,
                     gphash_adapter<key32, 32>, gphash_adapter<key32, 32, value32>,
                     gphash_adapter<key8, 1>>;
TYPED_TEST_SUITE(HashBaselines, Adapters);

// Runs `ops` through the index and returns statuses and versions.
// The reference: what each operation must return, applied in batch order. Within a batch each
// key appears at most once, so the outcome does not depend on the order of the batch's operations.
struct reference {
  std::unordered_map<std::uint64_t, std::uint64_t> versions;

  op_status apply(const kv_op& op, std::uint64_t* read) {
    const auto it = versions.find(op.key_id);
    const bool present = it != versions.end();
    switch (op.kind) {
      case op_kind::find:
        if (present) *read = it->second;
        return present ? op_status::ok : op_status::not_found;
      case op_kind::insert:
        if (present) return op_status::duplicate;
        versions[op.key_id] = op.version;
        return op_status::ok;
      case op_kind::update:
        if (!present) return op_status::not_found;
        *read = it->second;
        it->second = op.version;
        return op_status::ok;
      case op_kind::read_modify_write:
        if (!present) return op_status::not_found;
        *read = it->second;
        it->second += op.version;
        return op_status::ok;
      case op_kind::erase:
        if (!present) return op_status::not_found;
        versions.erase(it);
        return op_status::ok;
    }
    return op_status::bad_value;
  }
};

template <class Index>
void expect_content(Index& index, const reference& ref, std::uint64_t id_space) {
  std::vector<kv_op> finds;
  for (std::uint64_t id = 0; id < id_space; ++id) finds.push_back({id, op_kind::find, 0});
  std::vector<op_status> st;
  std::vector<std::uint64_t> ver;
  gpm::test::run_batch(index, finds, &st, &ver);
  for (std::uint64_t id = 0; id < id_space; ++id) {
    const auto it = ref.versions.find(id);
    if (it == ref.versions.end()) {
      ASSERT_EQ(st[id], op_status::not_found) << "key " << id << " should be absent";
    } else {
      ASSERT_EQ(st[id], op_status::ok) << "key " << id << ": " << to_string(st[id]);
      ASSERT_EQ(ver[id], it->second) << "key " << id << " holds the wrong version";
    }
  }
}

TYPED_TEST(HashBaselines, RandomBatchesMatchAReferenceMap) {
  gpm::test::scratch_dirs d("hash-baselines");
  constexpr std::uint64_t kIds = 1500, kRecords = 8000;
  gpm::pool p = gpm::pool::create("t.pool", TypeParam::pool_bytes(kIds, kRecords) + (4 << 20),
                                  kLayout, gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir()));
  auto index = TypeParam::create(p, kIds, kRecords);
  reference ref;
  std::mt19937_64 rng(42);
  std::uint64_t version = 1;
  for (int batch = 0; batch < 12; ++batch) {
    // A random subset of the ids, each with a random operation (inserts dominate early).
    std::vector<std::uint64_t> ids(kIds);
    for (std::uint64_t i = 0; i < kIds; ++i) ids[i] = i;
    std::shuffle(ids.begin(), ids.end(), rng);
    ids.resize(300 + rng() % 400);
    std::vector<kv_op> ops;
    for (std::uint64_t id : ids) {
      const unsigned r = rng() % 10;
      const op_kind k = batch < 3 || r < 3 ? op_kind::insert
                        : r < 5            ? op_kind::find
                        : r < 7            ? op_kind::update
                        : r < 8            ? op_kind::read_modify_write
                                           : op_kind::erase;
      ops.push_back({id, k, static_cast<std::uint32_t>(version++)});
    }
    std::vector<op_status> st;
    std::vector<std::uint64_t> ver;
    gpm::test::run_batch(*index, ops, &st, &ver);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      std::uint64_t read = 0;
      const op_status want = ref.apply(ops[i], &read);
      ASSERT_EQ(st[i], want) << "batch " << batch << " op " << i << " (" << to_string(ops[i].kind)
                             << " of key " << ops[i].key_id << ")";
      if (want == op_status::ok &&
          (ops[i].kind == op_kind::find || ops[i].kind == op_kind::read_modify_write)) {
        ASSERT_EQ(ver[i], read) << "batch " << batch << " op " << i << " read the wrong version";
      }
    }
  }
  expect_content(*index, ref, kIds + 10);
  // Reopened (and recovered), the index holds the same content.
  index.reset();
  expect_content(*TypeParam::open(p), ref, kIds + 10);
}

TYPED_TEST(HashBaselines, ConcurrentOperationsOnHotKeysKeepValuesIntact) {
  // Zipf-skewed YCSB A and F batches: many operations on one key in a batch. Every read must
  // find an intact value, every operation must succeed.
  gpm::test::scratch_dirs d("hash-hot");
  constexpr std::uint64_t kKeys = 512, kOps = 4096;
  gpm::pool p =
      gpm::pool::create("t.pool", TypeParam::pool_bytes(kKeys, kKeys + 2 * kOps) + (4 << 20),
                        kLayout, gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir()));
  auto index = TypeParam::create(p, kKeys, kKeys + 2 * kOps);
  std::vector<kv_op> load;
  for (std::uint64_t id = 0; id < kKeys; ++id) load.push_back({id, op_kind::insert, 0});
  std::vector<op_status> st;
  std::vector<std::uint64_t> ver;
  gpm::test::run_batch(*index, load, &st, &ver);
  for (workload_kind k : {workload_kind::a, workload_kind::f}) {
    const op_stream s = make_stream(k, kKeys, kOps, 1024, 0.99, 7);
    std::vector<kv_op> ops;
    for (std::uint64_t i = 0; i < 1024; ++i) ops.push_back(s.at(i));
    gpm::test::run_batch(*index, ops, &st, &ver);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      ASSERT_EQ(st[i], op_status::ok) << to_string(k) << " op " << i << ": " << to_string(st[i]);
    }
  }
}

TYPED_TEST(HashBaselines, RacingUpdatesOfOneKeyNeedOneRecordEach) {
  // The runner sizes out-of-place record space as keys + writes; updates that lose a race on a
  // hot key must not take extra records (they once did, and ran out under Zipf load).
  gpm::test::scratch_dirs d("hash-race");
  constexpr std::uint64_t kKeys = 64, kOps = 2048;
  gpm::pool p = gpm::pool::create("t.pool", TypeParam::pool_bytes(kKeys, kKeys + kOps) + (4 << 20),
                                  kLayout, gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir()));
  auto index = TypeParam::create(p, kKeys, kKeys + kOps);
  std::vector<kv_op> load;
  for (std::uint64_t id = 0; id < kKeys; ++id) load.push_back({id, op_kind::insert, 0});
  std::vector<op_status> st;
  gpm::test::run_batch(*index, load, &st, nullptr);
  // Batches of 64: GPHash reuses the value cells an update retires only after its batch, and
  // its table for 64 keys has about 80 spare cells.
  constexpr std::uint64_t kBatch = 64;
  for (std::uint64_t b = 0; b < kOps / kBatch; ++b) {
    std::vector<kv_op> ops;
    for (std::uint64_t i = b * kBatch; i < (b + 1) * kBatch; ++i) {
      ops.push_back({0, op_kind::update, static_cast<std::uint32_t>(i + 1)});
    }
    gpm::test::run_batch(*index, ops, &st, nullptr);
    for (std::size_t i = 0; i < ops.size(); ++i) {
      ASSERT_EQ(st[i], op_status::ok)
          << "batch " << b << " update " << i << ": " << to_string(st[i]);
    }
  }
}

TYPED_TEST(HashBaselines, FullTableReportsFullInsteadOfFailing) {
  gpm::test::scratch_dirs d("hash-full");
  constexpr std::uint64_t kKeys = 64, kRecords = 100;
  gpm::pool p = gpm::pool::create("t.pool", TypeParam::pool_bytes(kKeys, kRecords) + (4 << 20),
                                  kLayout, gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir()));
  auto index = TypeParam::create(p, kKeys, kRecords);
  std::vector<kv_op> ops;
  for (std::uint64_t id = 0; id < 2 * kRecords; ++id) ops.push_back({id, op_kind::insert, 1});
  std::vector<op_status> st;
  std::vector<std::uint64_t> ver;
  gpm::test::run_batch(*index, ops, &st, &ver);
  std::uint64_t ok = 0, full = 0;
  for (op_status s : st) {
    ok += s == op_status::ok;
    full += s == op_status::full;
  }
  EXPECT_EQ(ok + full, ops.size());
  EXPECT_GE(ok, kKeys / 2);
  EXPECT_LE(ok, kRecords);
  EXPECT_GT(full, 0u);
}

// ---- values ------------------------------------------------------------------------------------

template <class Value>
void expect_value_checks() {
  const Value v = Value::make(7, 3);
  EXPECT_TRUE(v.belongs_to(7));
  EXPECT_FALSE(v.belongs_to(8)) << "another key's value";
  EXPECT_FALSE(Value::make(8, 3).belongs_to(7));
  for (unsigned i = 2; i < Value::kWords; ++i) {
    Value torn = v;
    torn.w[i] = Value::make(7, 4).w[i];  // a word of another version's write
    EXPECT_FALSE(torn.belongs_to(7)) << "pattern word " << i;
  }
  Value mixed = v;
  mixed.w[1] = 4;  // the version of another write, the pattern of this one
  EXPECT_FALSE(mixed.belongs_to(7));
}

TEST(HashBaselinesValues, EverySizeNoticesForeignAndTornValues) {
  static_assert(sizeof(kv_value) == 128 && sizeof(value32) == 32);
  expect_value_checks<kv_value>();
  expect_value_checks<value32>();
}

TEST(HashBaselinesValues, PoolSizesFollowTheValueSize) {
  // The 32-byte variant allocates a quarter of the value space: records (clevel, slab) or
  // GPHash's value cells hold the value type, not 128 bytes.
  constexpr std::uint64_t kKeys = 1 << 16, kRecords = 1 << 17, kLog = 64;
  constexpr std::uint64_t kSaved = (sizeof(kv_value) - sizeof(value32)) * kRecords;
  const auto saved = [](std::uint64_t big, std::uint64_t small) {
    EXPECT_LT(small, big);
    return big - small;
  };
  EXPECT_NEAR(saved(clevel_index<key32>::pool_bytes(kKeys, kRecords),
                    clevel_index<key32, value32>::pool_bytes(kKeys, kRecords)),
              kSaved, 4096);
  EXPECT_EQ((cpu_hash_index<key32, value32>::pool_bytes(kKeys, kRecords)),
            (clevel_index<key32, value32>::pool_bytes(kKeys, kRecords)));
  EXPECT_GE(saved(slab_index<key32>::pool_bytes(kKeys, kRecords, kLog),
                  slab_index<key32, value32>::pool_bytes(kKeys, kRecords, kLog)),
            kSaved - 4096);
  // GPHash: 1.5 value cells per slot, at least one slot per key.
  EXPECT_GE(saved(gphash_index<key32>::pool_bytes(kKeys),
                  gphash_index<key32, value32>::pool_bytes(kKeys)),
            (sizeof(kv_value) - sizeof(value32)) * kKeys * 3 / 2);
}

// ---- header validation -------------------------------------------------------------------------

TEST(HashBaselinesHeader, WrongKeyOrValueSizeCorruptionAndMissingIndexAreClearErrors) {
  gpm::test::scratch_dirs d("hash-header");
  gpm::pool p = gpm::pool::create("t.pool", 16 << 20, kLayout,
                                  gpm::test::quiet_options(d.pm_dir(), d.snapshot_dir()));
  clevel_index<key8>::create(p, "c", 100, 200, kLaunch);
  slab_index<key8>::create(p, "s", 100, 200, kLaunch);
  const auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const gpm::error& e) {
      EXPECT_GT(std::string(e.what()).size(), 40u) << "the message should say what to do";
      return e.code();
    }
    ADD_FAILURE() << "no error";
    return gpm::errc::unsupported;
  };
  EXPECT_EQ(code_of([&] { clevel_index<key32>::open(p, "c", kLaunch); }),
            gpm::errc::invalid_argument);
  // The same key size with another value size: refused too (its records would be misread).
  EXPECT_EQ(code_of([&] { clevel_index<key8, value32>::open(p, "c", kLaunch); }),
            gpm::errc::invalid_argument);
  EXPECT_EQ(code_of([&] { slab_index<key8, value32>::open(p, "s", kLaunch); }),
            gpm::errc::invalid_argument);
  EXPECT_EQ(code_of([&] { slab_index<key8>::open(p, "c", kLaunch); }), gpm::errc::layout_mismatch);
  EXPECT_EQ(code_of([&] { clevel_index<key8>::open(p, "nothing", kLaunch); }),
            gpm::errc::not_found);
  EXPECT_EQ(code_of([&] {
              slab_index<key8>::open(p, "s", geometry{64, 256});
            }),
            gpm::errc::invalid_argument);
  auto* h = p.host_ptr<index_header>(p.get("c.header").offset);
  h->geometry[0] ^= 1;
  EXPECT_EQ(code_of([&] { clevel_index<key8>::open(p, "c", kLaunch); }), gpm::errc::corrupt);
  h->geometry[0] ^= 1;
  h->common.major = 99;
  gpm::format::seal_header(h);
  EXPECT_EQ(code_of([&] { clevel_index<key8>::open(p, "c", kLaunch); }), gpm::errc::version);
}

TEST(HashBaselinesGenerator, StreamsAreDeterministicAndFollowTheirMix) {
  const op_stream a = make_stream(workload_kind::a, 1000, 100000, 1000, 0.99, 3);
  std::uint64_t updates = 0;
  for (std::uint64_t i = 0; i < 100000; ++i) {
    const kv_op op = a.at(i);
    ASSERT_LT(op.key_id, 1000u);
    updates += op.kind == op_kind::update;
    ASSERT_EQ(op.key_id, a.at(i).key_id);
  }
  EXPECT_NEAR(static_cast<double>(updates) / 100000, 0.5, 0.01);
  // D reads only keys inserted before the operation's batch.
  const op_stream d = make_stream(workload_kind::d, 1000, 100000, 1000, 0.99, 3);
  for (std::uint64_t i = 0; i < 100000; ++i) {
    const kv_op op = d.at(i);
    if (op.kind == op_kind::insert) {
      ASSERT_EQ(op.key_id, 1000 + i / kLatestInsertPeriod);
    } else {
      ASSERT_LT(op.key_id, 1000 + (i - i % 1000) / kLatestInsertPeriod);
    }
  }
  EXPECT_THROW(make_stream(workload_kind::erase, 10, 11, 1, 0.99, 3), std::invalid_argument);
}

}  // namespace
