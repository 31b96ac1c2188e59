// gpmbench's record pieces on their own: the repeat statistics, the record line and the machine
// tag. (The JSON writer they use is tested in tests/tools/tool_json_test.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

#include "machine.hpp"
#include "record.hpp"
#include "stats.hpp"

namespace {

TEST(Stats, QuantilesInterpolateBetweenRanksLikeNumpy) {
  EXPECT_DOUBLE_EQ(gpmbench::quantile({3, 1, 2}, 0.5), 2);
  EXPECT_DOUBLE_EQ(gpmbench::quantile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(gpmbench::quantile({1, 2, 3, 4, 5}, 0.25), 2);
  EXPECT_DOUBLE_EQ(gpmbench::quantile({1, 2}, 0.25), 1.25);
  EXPECT_DOUBLE_EQ(gpmbench::quantile({7}, 0.75), 7);
  EXPECT_THROW(gpmbench::quantile({}, 0.5), std::invalid_argument);
}

TEST(Stats, SummaryOfRepeats) {
  const gpmbench::time_summary s = gpmbench::summarize({0.5, 0.1, 0.3, 0.2, 0.4});
  EXPECT_DOUBLE_EQ(s.median_s, 0.3);
  EXPECT_DOUBLE_EQ(s.min_s, 0.1);
  EXPECT_DOUBLE_EQ(s.p25_s, 0.2);
  EXPECT_DOUBLE_EQ(s.p75_s, 0.4);
  EXPECT_DOUBLE_EQ(s.max_s, 0.5);
}

TEST(Record, ThroughputFollowsFromTheMedian) {
  EXPECT_DOUBLE_EQ(gpmbench::gigabytes(2'000'000'000).value(0.5), 4.0);
  EXPECT_DOUBLE_EQ(gpmbench::mega_operations(3'000'000).value(2.0), 1.5);
  EXPECT_DOUBLE_EQ(gpmbench::nanoseconds_each(1000).value(1e-3), 1000.0);
}

TEST(Record, LineHasEveryFieldOfTheSchemaOnOneLine) {
  gpmbench::bench_record r;
  r.workload = "platform";
  r.mode = "persist_stream";
  r.backend = "host";
  r.machine.gpu = "emu \"x\"";
  r.sizes = {{"bytes", 4096}};
  r.repeats = 2;
  r.times_s = {0.25, 0.5};
  r.summary = gpmbench::summarize(r.times_s);
  r.throughput_value = 1.5;
  r.throughput_unit = "GB/s";
  r.ceilings = {{"d2h_memcpy_GBps", 3.0}};
  r.ratio_to_ceiling = {{"d2h_memcpy_GBps", 0.5}};
  r.metrics = {{"restore_s", 0.125}};
  r.timestamp = gpmbench::utc_timestamp();
  r.commit = "0123456789ab-dirty";
  const std::string line = gpmbench::to_json_line(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  for (const char* key : {"\"schema\":\"gpmkit.bench/1\"",
                          "\"workload\":\"platform\"",
                          "\"mode\":\"persist_stream\"",
                          "\"backend\":\"host\"",
                          "\"gpu\":\"emu \\\"x\\\"\"",
                          "\"pcie_generation\":null",
                          "\"sizes\":{\"bytes\":4096}",
                          "\"repeats\":2",
                          "\"warmup\":0",
                          "\"times_s\":[0.25,0.5]",
                          "\"median_s\":0.375",
                          "\"spread\":{\"min_s\":0.25,",
                          "\"p75_s\":0.4375",
                          "\"throughput\":{\"value\":1.5,\"unit\":\"GB/s\"}",
                          "\"bytes_persisted\":0",
                          "\"ceilings\":{\"d2h_memcpy_GBps\":3}",
                          "\"ratio_to_ceiling\":{\"d2h_memcpy_GBps\":0.5}",
                          "\"metrics\":{\"restore_s\":0.125}",
                          "\"timestamp\":\"",
                          "\"commit\":\"0123456789ab-dirty\""}) {
    EXPECT_NE(line.find(key), std::string::npos) << key << " missing from " << line;
  }
}

TEST(Record, SourceCommitComesFromTheEnvironmentElseTheBuild) {
  const std::string built = gpmbench::source_commit();
  EXPECT_FALSE(built.empty());
  ::setenv("GPMKIT_COMMIT", "feedfacecafe", 1);
  EXPECT_EQ(gpmbench::source_commit(), "feedfacecafe");
  ::unsetenv("GPMKIT_COMMIT");
  EXPECT_EQ(gpmbench::source_commit(), built);
}

TEST(Machine, TagComesFromTheDeviceName) {
  gpm::device_info dev;
  dev.name = "NVIDIA H100 80GB HBM3";
  EXPECT_EQ(gpmbench::machine_tag(dev), "h100");
  dev.name = "NVIDIA H200";
  EXPECT_EQ(gpmbench::machine_tag(dev), "h200");
  dev.name = "Tesla V100-SXM2-16GB";
  EXPECT_EQ(gpmbench::machine_tag(dev), "v100");
  dev.name = "Mystery Accelerator";
  EXPECT_EQ(gpmbench::machine_tag(dev), "gpu");
  dev.emulated = true;
  EXPECT_EQ(gpmbench::machine_tag(dev), "host-emulator");
}

}  // namespace
