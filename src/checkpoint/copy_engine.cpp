// The checkpoint's copy engine (see copy_engine.hpp).
#include "copy_engine.hpp"

#include <algorithm>

#include <gpm/checkpoint/digest.hpp>
#include <gpm/pool/pool.hpp>

#include "kernels.hpp"

namespace gpm::checkpoint_detail {

double seconds_since(clock::time_point t0) {
  return std::chrono::duration<double>(clock::now() - t0).count();
}

copy_engine::copy_engine(pool& p, std::uint32_t max_chunks, copy_path path)
    : p_(&p),
      path_(path),
      multiprocessors_(std::max(query_device().multiprocessors, 1)),
      sums_(max_chunks) {
  check_cuda(cudaHostAlloc(reinterpret_cast<void**>(&host_sums_),
                           max_chunks * sizeof(unsigned long long), cudaHostAllocDefault),
             "cudaHostAlloc");
}

copy_engine::~copy_engine() {
  if (host_sums_ != nullptr) cudaFreeHost(host_sums_);
}

void copy_engine::enqueue(action a, const copy_job& j, std::uint64_t copy_offset, copy_path via) {
  const cudaStream_t s = j.stream.get();
  unsigned long long* sum = sums_.data() + j.index;
  check_cuda(cudaMemsetAsync(sum, 0, sizeof(unsigned long long), s), "cudaMemsetAsync");
  if (a == action::digest_first || via == copy_path::dma) {
    if (a == action::copy) {
      check_cuda(cudaMemcpyAsync(p_->host_ptr<void>(copy_offset), j.source, j.bytes,
                                 cudaMemcpyDeviceToHost, s),
                 "cudaMemcpyAsync (checkpoint copy)");
    }
    enqueue_digest(j.source, j.bytes, sum, multiprocessors_, s);
  } else {
    void* dst = p_->ref().ptr<void>(copy_offset);
    enqueue_copy_digest(dst, j.source, j.bytes, sum, multiprocessors_, s);
  }
  check_cuda(cudaMemcpyAsync(host_sums_ + j.index, sum, sizeof(unsigned long long),
                             cudaMemcpyDeviceToHost, s),
             "cudaMemcpyAsync (digest)");
}

std::uint64_t copy_engine::finish(const copy_job& j) {
  j.stream.synchronize();
  return chunk_digest_finish(host_sums_[j.index], j.bytes);
}

void copy_engine::measure(const copy_job& j, std::uint64_t copy_offset) {
  double best = 0;
  for (copy_path via : {copy_path::gpu_stores, copy_path::dma}) {
    double t = 0;
    for (int round = 0; round < 2; ++round) {  // the first round warms up
      const auto t0 = clock::now();
      enqueue(action::copy, j, copy_offset, via);
      finish(j);
      t = seconds_since(t0);
    }
    if (path_ == copy_path::automatic || t < best) {
      path_ = via;
      best = t;
    }
  }
}

}  // namespace gpm::checkpoint_detail
