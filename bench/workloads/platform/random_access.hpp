// The platform's rates for random work on a pool object: persisted 8-byte stores, CAS
// increments and 128-byte line reads, each over an object of a given span (a power of two).
// Random access to host memory slows as the span grows (the GPU's page translations, the host's
// caches), so the `platform` workload measures them at 256 MiB, `random_span` at the spans of
// the benchmarks' tables, and the YCSB workloads at an index's span (their `bound` mode): each
// structure is compared with the rate at its own span. Every function checks its data after
// timing; none reads or writes outside its object.
#pragma once

#include <cstdint>

#include "resources.hpp"
#include "workload.hpp"

namespace gpmbench {

// Each works on p's object, whose size (a power of two) is the span.

// `stores` 8-byte stores to hashed words of the object, each persisted (random_span also measures
// posted 16-byte stores, store_random16).
measurement random_persists(const mode_context& ctx, const bench_pool& p, std::uint64_t stores,
                            const char* what);

// Which memory scope random_cas's CAS has: system (CPU threads could share the words), or
// gpm::pool_scope (only GPU threads touch them during a kernel, as in the hash indexes).
enum class cas_scope { system, pool };

// `increments` increments of hashed words by CAS, from zeroed words (so that the first attempt
// usually succeeds without reading the word); records the attempts made.
measurement random_cas(const mode_context& ctx, const bench_pool& p, std::uint64_t increments,
                       cas_scope scope, const char* what);

// `lines` reads of hashed 128-byte lines, 16 bytes a thread (8 threads a line, as a warp probing
// 4 buckets reads them), at gpm::pool_scope.
measurement random_line_reads(const mode_context& ctx, const bench_pool& p, std::uint64_t lines,
                              const char* what);

}  // namespace gpmbench
