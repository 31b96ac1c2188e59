// Property tests of GPHash against a reference map: random sequences of insert / upsert /
// update / erase batches, then lookups of the whole key space, typed over the key (8 bytes, 32
// bytes, variable length) and the bulk kernels' cooperative-group size (1, 8, 16, 32). Small
// tables, so the sequences also run through several resizes; some runs keep BktCache on, reloading
// after every batch.
#include <gpm/hash/gphash.cuh>
#include <gpm/pool/pool.hpp>

#include <random>

#include "crash_harness.hpp"
#include "gpm_test.hpp"
#include "hash_test_util.hpp"

namespace {

using gpm::hash_status;
using namespace gpm::test::hash;

template <class Key, unsigned G, bool Cached = false>
struct params {
  using key_type = Key;
  static constexpr unsigned cg = G;
  static constexpr bool cached = Cached;
};

template <class P>
class GphashProperty : public ::testing::Test {};
using Params =
    ::testing::Types<params<std::uint64_t, 1>, params<std::uint64_t, 8>, params<std::uint64_t, 32>,
                     params<std::uint64_t, 32, true>, params<gpm::key32, 1>, params<gpm::key32, 16>,
                     params<gpm::key32, 32>, params<gpm::key32, 8, true>, params<gpm::varkey, 1>,
                     params<gpm::varkey, 32>, params<gpm::varkey, 32, true>>;
TYPED_TEST_SUITE(GphashProperty, Params);

TYPED_TEST(GphashProperty, MatchesAReferenceMap) {
  using Key = typename TypeParam::key_type;
  gpm::test::scratch_dirs dirs("gphash-prop");
  gpm::pool pool = gpm::pool::create("p.pool", 32 << 20, "gphash-prop",
                                     quiet_options(dirs.pm_dir(), dirs.snapshot_dir()));
  auto t = gpm::gphash<Key>::create(pool, "kv", {.value_bytes = 24, .top_level = 3},
                                    {.cg_size = TypeParam::cg});
  if (TypeParam::cached) {
    t.enable_cache({.fraction = 0.3, .reload_every = 1});
  }
  driver<Key> d(t);
  model m;
  constexpr std::uint64_t kSpace = 400;
  std::mt19937_64 rng(gpm::test::trial_seed(static_cast<int>(TypeParam::cg)));
  std::vector<std::uint64_t> all(kSpace);
  std::iota(all.begin(), all.end(), 0);
  for (std::uint64_t batch = 1; batch <= 24; ++batch) {
    std::shuffle(all.begin(), all.end(), rng);
    const std::size_t n = 16 + rng() % 64;
    std::vector<std::uint64_t> keys[4];
    for (std::size_t i = 0; i < n; ++i) {
      // Inserts dominate early, so the table fills and grows.
      const std::uint64_t r = rng() % 10;
      const int o = r < 5 ? 0 : r < 7 ? 1 : r < 9 ? 2 : 3;
      keys[o].push_back(all[i]);
    }
    for (int o = 0; o < 4; ++o) {
      const std::vector<std::uint64_t> versions(keys[o].size(), batch);
      const auto st = d.run(static_cast<op>(o), keys[o], versions);
      for (std::size_t i = 0; i < keys[o].size(); ++i) {
        ASSERT_EQ(st[i], m.apply(static_cast<op>(o), keys[o][i], batch))
            << "batch " << batch << " op " << o << " key " << keys[o][i];
      }
    }
    if (batch % 4 != 0) continue;
    std::vector<std::uint64_t> space(kSpace);
    std::iota(space.begin(), space.end(), 0);
    const auto f = d.find(space);
    for (std::uint64_t k = 0; k < kSpace; ++k) {
      const auto want = m.get(k);
      ASSERT_EQ(f.status[k], want ? hash_status::found : hash_status::not_found)
          << "batch " << batch << " key " << k;
      if (want) {
        ASSERT_TRUE(value_is(&f.values[k * d.words()], d.words(), k, *want))
            << "batch " << batch << " key " << k;
      }
    }
  }
  EXPECT_EQ(t.size(), m.items.size());
  EXPECT_GT(t.stats().resizes, 0u);
  const gpm::gphash_check c = t.check();
  EXPECT_TRUE(c.ok) << (c.problems.empty() ? "" : c.problems.front());
  if (TypeParam::cached) {
    EXPECT_GT(t.stats().cache_hits, 0u);
  }
}

}  // namespace
