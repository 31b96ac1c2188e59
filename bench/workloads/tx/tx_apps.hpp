// The applications of the gpmbench `tx` workloads (docs/workloads/tx.md), each a factory that
// sizes its application for the context (the paper's sizes on a GPU, smaller on the emulator and
// with --quick). The workloads that run them are registered in gpmbench/workload.hpp.
#pragma once

#include <cstdint>

#include "workloads/tx/tx_bench.hpp"

namespace gpmbench::tx {

// ATM (tx_atm.cu): `transfers` transfers between random accounts of `accounts`.
application_factory atm_application(std::uint64_t accounts, std::uint64_t transfers);

// Hashtable (tx_hash.cu): `inserts` distinct keys into `base` base entries backed by `extended`
// extended entries, linear probing.
application_factory hash_application(std::uint64_t inserts, std::uint64_t base,
                                     std::uint64_t extended);

// BVH (tx_bvh.cu): the Karras build and the bottom-up bounding-box reduce over `triangles`
// seeded random triangles.
application_factory bvh_application(std::uint64_t triangles);

}  // namespace gpmbench::tx
