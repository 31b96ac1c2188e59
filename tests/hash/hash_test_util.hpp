// Helpers of the GPHash tests: keys and self-describing values, a driver that runs bulk
// operations from host vectors through device buffers, and a reference model.
#pragma once

#include <gpm/hash/gphash.cuh>

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "gpm_test.hpp"
#include "scratch_pool.hpp"

namespace gpm::test::hash {

using gpm::test::quiet_options;  // scratch_pool.hpp's, for the tests that use this namespace

template <class Key>
Key make_key(std::uint64_t i) {
  if constexpr (std::is_same_v<Key, key32>) {
    return key32{{i, gpm::mix64(i), ~i, gpm::mix64(i ^ 0x1234)}};
  } else {
    return i * 0x9e3779b97f4a7c15ull % 0xfffffffffffffff0ull;  // spread; never reserved
  }
}

// The bytes of variable-length key i: 8 to 44 bytes, starting with i itself (so all differ).
inline std::vector<unsigned char> varkey_bytes(std::uint64_t i) {
  std::vector<unsigned char> b(8 + i % 37);
  for (std::size_t j = 0; j < b.size(); ++j) {
    b[j] = j < 8 ? static_cast<unsigned char>(i >> (8 * j))
                 : static_cast<unsigned char>(gpm::mix64(i + j));
  }
  return b;
}

// Keys i in device memory (variable-length keys point into `bytes`).
template <class Key>
struct key_upload {
  device_buffer<Key> keys;
  device_buffer<unsigned char> bytes;
};
template <class Key>
key_upload<Key> upload_keys(const std::vector<std::uint64_t>& idx) {
  key_upload<Key> u;
  std::vector<Key> keys(idx.size());
  if constexpr (std::is_same_v<Key, varkey>) {
    std::vector<unsigned char> bytes;
    std::vector<std::size_t> at;
    for (std::uint64_t i : idx) {
      at.push_back(bytes.size());
      const auto b = varkey_bytes(i);
      bytes.insert(bytes.end(), b.begin(), b.end());
    }
    bytes.resize(bytes.size() + 1);
    u.bytes = to_device(bytes);
    for (std::size_t k = 0; k < idx.size(); ++k) {
      keys[k] = varkey{u.bytes.data() + at[k], static_cast<std::uint32_t>(8 + idx[k] % 37)};
    }
  } else {
    for (std::size_t k = 0; k < idx.size(); ++k) keys[k] = make_key<Key>(idx[k]);
  }
  keys.resize(keys.size() + 1);  // never an empty buffer
  u.keys = to_device(keys);
  return u;
}

// A value that says whose it is: word 0 = key index, word 1 = version, the rest derived. A torn
// or misplaced value never verifies. Device code may write one too.
GPM_HOST_DEVICE inline void fill_value(std::uint64_t* v, std::uint32_t words, std::uint64_t index,
                                       std::uint64_t version) {
  v[0] = index;
  v[1] = version;
  for (std::uint32_t i = 2; i < words; ++i) v[i] = gpm::mix64(index * 131 + version * 7 + i);
}
inline bool value_is(const std::uint64_t* v, std::uint32_t words, std::uint64_t index,
                     std::uint64_t version) {
  std::vector<std::uint64_t> want(words);
  fill_value(want.data(), words, index, version);
  return std::equal(want.begin(), want.end(), v);
}

// A typed test's parameters: the key type, and whether the table keeps the fingerprint mirror.
template <class Key, bool Mirror = false>
struct keyed {
  using key_type = Key;
  static constexpr bool mirror = Mirror;
};

// A table's options `o` with the fingerprint mirror on or off.
inline gpm::gphash_options mirrored(bool mirror, gpm::gphash_options o = {}) {
  o.fingerprint_mirror = mirror;
  return o;
}

// Key indices [from, to).
inline std::vector<std::uint64_t> range(std::uint64_t from, std::uint64_t to) {
  std::vector<std::uint64_t> v(to - from);
  std::iota(v.begin(), v.end(), from);
  return v;
}

enum class op { insert, upsert, update, erase };

// Runs batches of operations given as host vectors.
template <class Key>
class driver {
 public:
  explicit driver(gpm::gphash<Key>& t) : t_(t), words_(t.config().value_bytes / 8) {}

  std::vector<hash_status> run(op o, const std::vector<std::uint64_t>& idx,
                               const std::vector<std::uint64_t>& versions) {
    const std::size_t n = idx.size();
    if (n == 0) return {};
    std::vector<std::uint64_t> values(n * words_);
    for (std::size_t i = 0; i < n; ++i) {
      fill_value(&values[i * words_], words_, idx[i], versions.empty() ? 0 : versions[i]);
    }
    const key_upload<Key> up = upload_keys<Key>(idx);
    const Key* d_keys = up.keys.data();
    auto d_values = to_device(values);
    device_buffer<hash_status> d_status(n);
    switch (o) {
      case op::insert: t_.insert(d_keys, d_values.data(), n, d_status.data()); break;
      case op::upsert: t_.upsert(d_keys, d_values.data(), n, d_status.data()); break;
      case op::update: t_.update(d_keys, d_values.data(), n, d_status.data()); break;
      case op::erase: t_.erase(d_keys, n, d_status.data()); break;
    }
    return to_host(d_status);
  }

  struct found {
    std::vector<hash_status> status;
    std::vector<std::uint64_t> values;  // words() per key
  };
  found find(const std::vector<std::uint64_t>& idx) {
    const std::size_t n = idx.size();
    const key_upload<Key> up = upload_keys<Key>(idx);
    device_buffer<std::uint64_t> d_out(n * words_ + 1);
    device_buffer<hash_status> d_status(n + 1);
    t_.find(up.keys.data(), n, d_out.data(), d_status.data());
    found f{to_host(d_status), to_host(d_out)};
    f.status.resize(n);
    return f;
  }

  std::uint32_t words() const { return words_; }

 private:
  gpm::gphash<Key>& t_;
  std::uint32_t words_;
};

// The reference: key index -> version.
struct model {
  std::map<std::uint64_t, std::uint64_t> items;
  hash_status apply(op o, std::uint64_t k, std::uint64_t version) {
    const bool present = items.count(k) != 0;
    switch (o) {
      case op::insert:
        if (present) return hash_status::exists;
        items[k] = version;
        return hash_status::inserted;
      case op::upsert:
        items[k] = version;
        return present ? hash_status::updated : hash_status::inserted;
      case op::update:
        if (!present) return hash_status::not_found;
        items[k] = version;
        return hash_status::updated;
      case op::erase:
        if (!present) return hash_status::not_found;
        items.erase(k);
        return hash_status::erased;
    }
    return hash_status::invalid_key;
  }
  std::optional<std::uint64_t> get(std::uint64_t k) const {
    auto it = items.find(k);
    if (it == items.end()) return std::nullopt;
    return it->second;
  }
};

}  // namespace gpm::test::hash
