// The compiled read's memory and threads: pooled batch buffers, and helper threads that copy
// parts of a batch beside (or ahead of) the thread that asks for it. Included by passes.cc.
#pragma once

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "tensorflow/core/framework/allocation_description.pb.h"
#include "tensorflow/core/framework/tensor.h"

// A batch field's memory, kept by the process's pool and handed out again once no tensor
// holds it: the batches rotate through a few buffers, which stay in the CPU cache, as
// PackedSequence's pooled arrays do, instead of a fresh allocation for every batch.
class PooledBuffer : public tensorflow::TensorBuffer {
 public:
  explicit PooledBuffer(size_t size)
      : TensorBuffer(std::aligned_alloc(64, (size + 63) / 64 * 64)), size_(size) {}
  ~PooledBuffer() override { std::free(data()); }
  size_t size() const override { return size_; }
  TensorBuffer* root_buffer() override { return this; }
  void FillAllocationDescription(tensorflow::AllocationDescription* proto) const override {
    proto->set_requested_bytes(size_);
    proto->set_allocator_name("packer_pool");
  }

 private:
  size_t size_;
};

class BufferPool {
 public:
  ~BufferPool() {
    for (PooledBuffer* buffer : buffers_) buffer->Unref();
  }
  // A buffer of `size` bytes no tensor holds (the caller's reference), or a new one, which
  // the pool keeps in a free place or instead of a free buffer of another size.
  PooledBuffer* Take(size_t size) {
    std::lock_guard<std::mutex> hold(lock_);
    PooledBuffer** spare = nullptr;
    for (PooledBuffer*& buffer : buffers_) {
      if (!buffer->RefCountIsOne()) continue;
      if (buffer->size() == size) {
        buffer->Ref();
        return buffer;
      }
      spare = &buffer;
    }
    auto* buffer = new PooledBuffer(size);
    if (buffer->data() == nullptr) return buffer;  // no memory: not pooled, the caller says so
    if (buffers_.size() < kMaxBuffers) {
      buffers_.push_back(buffer);
    } else if (spare != nullptr) {
      (*spare)->Unref();
      *spare = buffer;
    } else {
      return buffer;  // every pooled buffer is in use: this one is the caller's alone
    }
    buffer->Ref();
    return buffer;
  }

 private:
  static constexpr size_t kMaxBuffers = 16;
  std::mutex lock_;
  std::vector<PooledBuffer*> buffers_;
};

// A batch's copy in parts, taken one at a time by the helper threads and by the thread that
// waits for it, so a wait never depends on a helper that has not started.
class Job {
 public:
  Job(int parts, std::function<void(int)> work) : parts_(parts), work_(std::move(work)) {}
  // Run the parts nobody has taken yet.
  void Drain() {
    int part, did = 0;
    while ((part = next_.fetch_add(1)) < parts_) {
      work_(part);
      ++did;
    }
    if (did) {
      std::lock_guard<std::mutex> hold(lock_);
      done_ += did;
      if (done_ == parts_) finished_.notify_all();
    }
  }
  // Take parts too, then wait for those others took.
  void Wait() {
    Drain();
    std::unique_lock<std::mutex> hold(lock_);
    finished_.wait(hold, [&] { return done_ == parts_; });
  }

 private:
  const int parts_;
  const std::function<void(int)> work_;
  std::atomic<int> next_{0};
  std::mutex lock_;
  std::condition_variable finished_;
  int done_ = 0;
};

// Helper threads, one fewer than the cores this process may use (an iterator reads on one of
// TensorFlow's threads, or its consumer's) but at least one (a batch read ahead is copied
// while the consumer's step waits), taking queued jobs' parts in order.
class Helpers {
 public:
  Helpers() {
    cpu_set_t set;
    count_ = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    for (int i = 0; i < std::max(1, count_ - 1); ++i) threads_.emplace_back([this] { Serve(); });
  }
  ~Helpers() {
    {
      std::lock_guard<std::mutex> hold(lock_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int count() const { return count_; }  // the cores: threads that may copy one batch
  // Queue work(part) for part in [0, parts) and return at once; Finish waits for it.
  std::shared_ptr<Job> Start(int parts, std::function<void(int)> work) {
    auto job = std::make_shared<Job>(parts, std::move(work));
    {
      std::lock_guard<std::mutex> hold(lock_);
      jobs_.push_back(job);
    }
    wake_.notify_all();
    return job;
  }
  // Take the job's remaining parts on this thread, wait for the rest, unqueue it.
  void Finish(const std::shared_ptr<Job>& job) {
    job->Wait();
    Forget(job);
  }

 private:
  void Forget(const std::shared_ptr<Job>& job) {
    std::lock_guard<std::mutex> hold(lock_);
    for (auto it = jobs_.begin(); it != jobs_.end(); ++it) {
      if (*it == job) {
        jobs_.erase(it);
        return;
      }
    }
  }
  void Serve() {
    std::unique_lock<std::mutex> hold(lock_);
    while (true) {
      wake_.wait(hold, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      auto job = jobs_.front();
      hold.unlock();
      job->Drain();  // every part taken when it returns: nothing left to do for this job
      hold.lock();
      if (!jobs_.empty() && jobs_.front() == job) jobs_.pop_front();
    }
  }
  std::vector<std::thread> threads_;
  std::mutex lock_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> jobs_;
  bool stop_ = false;
  int count_ = 1;
};
