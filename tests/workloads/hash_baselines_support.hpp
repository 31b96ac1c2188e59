// What the tests of the YCSB comparison indexes share: pool options for a test's scratch
// directories and running a batch of operations through any index of the YCSB runner.
#pragma once

#include <gpm/pool/pool.hpp>

#include <string>
#include <vector>

#include "gpm_test.hpp"
#include "workloads/ycsb/kv_format.cuh"

namespace gpm::test {

inline gpm::pool_options quiet_options(const std::string& pm_dir, const std::string& snapshot_dir) {
  gpm::pool_options o;
  o.pm_dir = pm_dir;
  o.snapshot_dir = snapshot_dir;
  o.notice = [](const std::string&) {};
  return o;
}

// Runs `ops` through the index as one batch; fills the statuses and versions read (either may be
// null).
template <class Index>
void run_batch(Index& index, const std::vector<gpmbench::ycsb::kv_op>& ops,
               std::vector<gpmbench::ycsb::op_status>* status,
               std::vector<std::uint64_t>* versions) {
  auto d_ops = to_device(ops);
  device_buffer<gpmbench::ycsb::op_status> d_status(ops.size());
  device_buffer<std::uint64_t> d_versions(ops.size());
  const stream s;
  index.execute(d_ops.data(), d_status.data(), ops.size(), s, d_versions.data());
  s.synchronize();
  if (status != nullptr) *status = to_host(d_status);
  if (versions != nullptr) *versions = to_host(d_versions);
}

}  // namespace gpm::test
