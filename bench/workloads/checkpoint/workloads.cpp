// The checkpoint workloads as gpmbench registers them (workload.hpp declares these).
#include "app.hpp"

namespace gpmbench {

workload cp_dnn_workload() {
  return checkpoint_workload(
      {"cp_dnn", "MLP training (weights + momentum) checkpointed", make_dnn_app});
}
workload cp_cfd_workload() {
  return checkpoint_workload(
      {"cp_cfd", "2-D Euler solver on a generated mesh, checkpointed", make_cfd_app});
}
workload cp_blackscholes_workload() {
  return checkpoint_workload(
      {"cp_blackscholes", "iterated Black-Scholes pricing, checkpointed", make_blackscholes_app});
}
workload cp_hotspot_workload() {
  return checkpoint_workload(
      {"cp_hotspot", "Hotspot thermal stencil, checkpointed", make_hotspot_app});
}
workload cp_hetero_workload() {
  return checkpoint_workload({"cp_hetero",
                              "read-only, pre-copyable, rarely and always changing chunks: "
                              "HeteroCheckpoint's optimisations",
                              make_hetero_app});
}

}  // namespace gpmbench
