// The checkpoint's copy engine (see copy_engine.hpp).
#include "copy_engine.hpp"

#include <algorithm>

#include <gpm/checkpoint/digest.hpp>
#include <gpm/platform/error.hpp>
#include <gpm/pool/pool.hpp>

namespace gpm::checkpoint_detail {

copy_engine::copy_engine(pool& p, std::uint32_t max_chunks, copy_path path)
    : p_(&p),
      path_(path),
      multiprocessors_(std::max(query_device().multiprocessors, 1)),
      max_chunks_(max_chunks),
      table_(max_chunks),
      device_table_(max_chunks),
      batch_sums_(max_chunks),
      host_batch_sums_(max_chunks),
      sums_(max_chunks),
      host_sums_(max_chunks) {}

void* copy_engine::start_pool_copy(std::uint64_t copy_offset, const void* source,
                                   std::uint64_t bytes, bool by_dma, cudaStream_t dma) {
  if (!by_dma) return p_->ref().ptr<void>(copy_offset);
  check_cuda(cudaMemcpyAsync(p_->host_ptr<void>(copy_offset), source, bytes,
                             cudaMemcpyDeviceToHost, dma),
             "cudaMemcpyAsync (checkpoint copy)");
  return nullptr;
}

void copy_engine::enqueue_batch(const std::vector<batch_job>& jobs, copy_path via) {
  if (jobs.size() > max_chunks_) {
    throw_error(errc::invalid_argument, "checkpoint copy engine: a batch of " +
                                            std::to_string(jobs.size()) + " chunks exceeds its " +
                                            std::to_string(max_chunks_));
  }
  const cudaStream_t s = stream_.get();
  const auto n = static_cast<std::uint32_t>(jobs.size());
  if (n == 0) return;
  table_uploaded_.synchronize();  // the last batch's table has been read
  batch_bytes_.resize(n);
  // The DMAs wait for what stream_ waits for (the sources' producers), and stream_ for them.
  forked_.record(s);
  check_cuda(cudaStreamWaitEvent(dma_stream_.get(), forked_.get(), 0), "cudaStreamWaitEvent");
  std::uint64_t tiles = 0;
  for (std::uint32_t k = 0; k < n; ++k) {
    const batch_job& j = jobs[k];
    void* copy = j.copy_offset == 0
                     ? j.gpu_copy
                     : start_pool_copy(j.copy_offset, j.source, j.bytes,
                                       via == copy_path::dma && j.bytes >= kDmaMinBytes,
                                       dma_stream_.get());
    table_.data()[k] = {j.source, copy, j.bytes, tiles};
    tiles += tiles_of(j.bytes);
    batch_bytes_[k] = j.bytes;
  }
  check_cuda(cudaMemcpyAsync(device_table_.data(), table_.data(), n * sizeof(chunk_span),
                             cudaMemcpyHostToDevice, s),
             "cudaMemcpyAsync (checkpoint batch)");
  table_uploaded_.record(s);
  check_cuda(cudaMemsetAsync(batch_sums_.data(), 0, n * sizeof(unsigned long long), s),
             "cudaMemsetAsync");
  enqueue_spans(device_table_.data(), n, tiles, batch_sums_.data(), multiprocessors_, s);
  check_cuda(cudaMemcpyAsync(host_batch_sums_.data(), batch_sums_.data(),
                             n * sizeof(unsigned long long), cudaMemcpyDeviceToHost, s),
             "cudaMemcpyAsync (digests)");
  joined_.record(dma_stream_.get());
  check_cuda(cudaStreamWaitEvent(s, joined_.get(), 0), "cudaStreamWaitEvent");
}

std::vector<std::uint64_t> copy_engine::finish_batch() {
  stream_.synchronize();
  std::vector<std::uint64_t> out(batch_bytes_.size());
  for (std::size_t k = 0; k < out.size(); ++k) {
    out[k] = chunk_digest_finish(host_batch_sums_.data()[k], batch_bytes_[k]);
  }
  return out;
}

void copy_engine::enqueue(action a, const copy_job& j, std::uint64_t copy_offset, copy_path via) {
  const cudaStream_t s = j.stream.get();
  unsigned long long* sum = sums_.data() + j.index;
  check_cuda(cudaMemsetAsync(sum, 0, sizeof(unsigned long long), s), "cudaMemsetAsync");
  void* copy = a == action::copy
                   ? start_pool_copy(copy_offset, j.source, j.bytes, via == copy_path::dma, s)
                   : nullptr;
  enqueue_span({j.source, copy, j.bytes, 0}, sum, multiprocessors_, s);
  check_cuda(cudaMemcpyAsync(host_sums_.data() + j.index, sum, sizeof(unsigned long long),
                             cudaMemcpyDeviceToHost, s),
             "cudaMemcpyAsync (digest)");
}

std::uint64_t copy_engine::finish(const copy_job& j) {
  j.stream.synchronize();
  return chunk_digest_finish(host_sums_.data()[j.index], j.bytes);
}

void copy_engine::measure(const batch_job& j) {
  double best = 0;
  for (copy_path via : {copy_path::gpu_stores, copy_path::dma}) {
    double t = 0;
    for (int round = 0; round < 2; ++round) {  // the first round warms up
      const auto t0 = clock::now();
      enqueue_batch({j}, via);
      finish_batch();
      t = seconds_since(t0);
    }
    if (path_ == copy_path::automatic || t < best) {
      path_ = via;
      best = t;
    }
  }
}

}  // namespace gpm::checkpoint_detail
