// PackerPassesDataset: packer.tf.dataset's batches of an npy pack read in C++ (packer.tf.compiled).
//
// A tf.data source: each new iterator (Keras makes one an epoch) asks packer's Python side
// once for its pass (the sorted sample indices of every batch, from the seeded Loader), then
// yields each batch with no Python, no GIL and no function per element: every field's rows
// copied with memcpy from the shard files, mapped once per process, into buffers that a pool
// hands out again once no tensor holds them, split over a helper thread per usable core.
// Every field of every shard is one file whose record i starts at byte base + i * stride.
#include <Python.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/allocation_description.pb.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/model.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

// Each thread copies at least this many bytes of a batch (packer.reading.gather's measure).
constexpr int64_t kMinBytesPerThread = 2 << 20;

// A batch field's memory, kept by the process's pool and handed out again once no tensor
// holds it: the batches rotate through a few buffers, which stay in the CPU cache, as
// PackedSequence's pooled arrays do, instead of a fresh allocation for every batch.
class PooledBuffer : public TensorBuffer {
 public:
  explicit PooledBuffer(size_t size)
      : TensorBuffer(std::aligned_alloc(64, (size + 63) / 64 * 64)), size_(size) {}
  ~PooledBuffer() override { std::free(data()); }
  size_t size() const override { return size_; }
  TensorBuffer* root_buffer() override { return this; }
  void FillAllocationDescription(AllocationDescription* proto) const override {
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

// A shard file mapped once for the process: a new mapping per iterator (Keras makes one an
// epoch) would fault every page in again. Kept while the file on disk is the one mapped.
struct Mapping {
  const char* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data != nullptr) munmap(const_cast<char*>(data), size);
  }
};

using FileId = std::tuple<dev_t, ino_t, off_t, int64_t>;  // device, inode, size, mtime (ns)

// The process's mappings by path, each with the file it mapped.
struct MappedFiles {
  std::mutex lock;
  std::map<std::string, std::pair<FileId, std::shared_ptr<const Mapping>>> maps;
};

MappedFiles& Mapped() {
  static MappedFiles* mapped = new MappedFiles();
  return *mapped;
}

// Forget the mappings of files deleted or replaced since (once a dataset: a stat a file).
void ForgetStaleMappings() {
  MappedFiles& m = Mapped();
  std::lock_guard<std::mutex> hold(m.lock);
  for (auto it = m.maps.begin(); it != m.maps.end();) {
    struct stat now;
    const FileId& was = it->second.first;
    const bool same = stat(it->first.c_str(), &now) == 0 && now.st_ino == std::get<1>(was) &&
                      now.st_size == std::get<2>(was);
    it = same ? std::next(it) : m.maps.erase(it);
  }
}

Status MapFile(const std::string& path, std::shared_ptr<const Mapping>* out) {
  auto& lock = Mapped().lock;
  auto& maps = Mapped().maps;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errors::NotFound(path, ": cannot be opened (", std::strerror(errno), ")");
  struct stat st;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return errors::NotFound(path, ": cannot be read (", std::strerror(errno), ")");
  }
  const FileId id{st.st_dev, st.st_ino, st.st_size,
                  int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
  std::lock_guard<std::mutex> hold(lock);
  auto found = maps.find(path);
  if (found == maps.end() || found->second.first != id) {
    auto mapping = std::make_shared<Mapping>();
    if (st.st_size > 0) {
      void* data = mmap(nullptr, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
      if (data == MAP_FAILED) {
        close(fd);
        return errors::Internal(path, ": cannot be mapped (", std::strerror(errno), ")");
      }
      mapping->data = static_cast<const char*>(data);
      mapping->size = st.st_size;
    }
    maps[path] = {id, mapping};
    found = maps.find(path);
  }
  close(fd);
  *out = found->second.second;
  return OkStatus();
}

// Helper threads that copy parts of a batch beside the calling thread (one fewer than the
// cores this process may use; an iterator reads on one of TensorFlow's threads). The caller
// takes parts too and never waits for a helper that has not started.
class Helpers {
 public:
  Helpers() {
    cpu_set_t set;
    int cores = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
    for (int i = 1; i < cores; ++i) threads_.emplace_back([this] { Serve(); });
    count_ = threads_.size() + 1;
  }
  ~Helpers() {
    {
      std::lock_guard<std::mutex> hold(lock_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int count() const { return count_; }
  // Run work(part) for part in [0, parts), on this thread and the helpers; returns when done.
  void Run(int parts, const std::function<void(int)>& work) {
    std::lock_guard<std::mutex> one(run_lock_);  // one batch at a time shares the helpers
    auto job = std::make_shared<Job>(parts, work);
    {
      std::lock_guard<std::mutex> hold(lock_);
      job_ = job;
      ++generation_;
    }
    wake_.notify_all();
    job->Drain();
    {
      std::lock_guard<std::mutex> hold(lock_);
      job_.reset();
    }
    std::unique_lock<std::mutex> hold(job->lock);
    job->finished.wait(hold, [&] { return job->done == job->parts; });
  }

 private:
  struct Job {
    Job(int parts, const std::function<void(int)>& work) : parts(parts), work(work) {}
    void Drain() {
      int part, did = 0;
      while ((part = next.fetch_add(1)) < parts) {
        work(part);
        ++did;
      }
      if (did) {
        std::lock_guard<std::mutex> hold(lock);
        done += did;
        if (done == parts) finished.notify_all();
      }
    }
    const int parts;
    const std::function<void(int)>& work;
    std::atomic<int> next{0};
    std::mutex lock;
    std::condition_variable finished;
    int done = 0;
  };
  void Serve() {
    std::unique_lock<std::mutex> hold(lock_);
    uint64_t seen = 0;
    while (true) {
      wake_.wait(hold, [&] { return stop_ || (job_ && generation_ != seen); });
      if (stop_) return;
      auto job = job_;
      seen = generation_;
      hold.unlock();
      job->Drain();
      hold.lock();
    }
  }
  std::vector<std::thread> threads_;
  std::mutex lock_, run_lock_;
  std::condition_variable wake_;
  std::shared_ptr<Job> job_;
  uint64_t generation_ = 0;
  bool stop_ = false;
  int count_ = 1;
};


using namespace tensorflow::data;

namespace {

// What every iterator of one dataset reads: the fields, and each shard field's file.
struct Layout {
  DataTypeVector dtypes;
  std::vector<TensorShape> rows;             // one record of each field
  std::vector<PartialTensorShape> shapes;    // a batch of each field: [rows or ?, *row]
  std::vector<std::string> files;            // shard-major: shard s, field f at s * F + f
  std::vector<int64_t> bases, strides, firsts, bytes;
  std::vector<std::shared_ptr<const Mapping>> maps;
  std::string callback, token;               // "module:function" called with the token
  int64_t batches = kUnknownCardinality;
};

BufferPool& Pool() {
  static BufferPool* pool = new BufferPool();
  return *pool;
}

Helpers& CopyHelpers() {
  static Helpers* helpers = new Helpers();
  return *helpers;
}

// The next pass: callback(token) -> (sorted indices of every batch, each batch's start).
Status TakePass(const Layout& l, std::vector<int64_t>* order, std::vector<int64_t>* starts) {
  const size_t colon = l.callback.rfind(':');
  PyGILState_STATE gil = PyGILState_Ensure();
  PyObject* module = PyImport_ImportModule(l.callback.substr(0, colon).c_str());
  PyObject* result = module == nullptr ? nullptr
                                       : PyObject_CallMethod(module, l.callback.substr(colon + 1).c_str(),
                                                             "s", l.token.c_str());
  PyObject *first = nullptr, *second = nullptr;
  if (result != nullptr && PyArg_ParseTuple(result, "OO", &first, &second)) {
    for (auto [object, out] : {std::pair{first, order}, std::pair{second, starts}}) {
      Py_buffer view;
      if (PyObject_GetBuffer(object, &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0) break;
      const int64_t* data = static_cast<const int64_t*>(view.buf);
      out->assign(data, data + view.len / sizeof(int64_t));
      PyBuffer_Release(&view);
    }
  }
  std::string error;
  if (PyErr_Occurred()) {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyObject* text = value == nullptr ? nullptr : PyObject_Str(value);
    const char* chars = text == nullptr ? nullptr : PyUnicode_AsUTF8(text);
    error = chars == nullptr ? "an error" : chars;
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(trace);
  }
  Py_XDECREF(result);
  Py_XDECREF(module);
  PyGILState_Release(gil);
  if (!error.empty()) return errors::FailedPrecondition(error);
  const int64_t total = order->size();
  if (starts->empty() || starts->front() != 0 || starts->back() != total ||
      !std::is_sorted(starts->begin(), starts->end())) {
    return errors::Internal("packer: a pass whose batch starts do not cover its indices");
  }
  for (int64_t i : *order) {
    if (i < 0 || i >= l.firsts.back()) {
      // not OutOfRange, which tf.data takes for the end of the pass: an epoch cut short
      return errors::Internal("packer: sample ", i, " out of range 0..", l.firsts.back() - 1);
    }
  }
  return OkStatus();
}

class PackerPassesDatasetOp : public DatasetOpKernel {
 public:
  explicit PackerPassesDatasetOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {
    auto l = std::make_shared<Layout>();
    OP_REQUIRES_OK(ctx, ctx->GetAttr("dtypes", &l->dtypes));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("shapes", &l->rows));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("files", &l->files));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("bases", &l->bases));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("strides", &l->strides));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("firsts", &l->firsts));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("callback", &l->callback));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("token", &l->token));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("batches", &l->batches));
    int64_t rows;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("rows", &rows));
    const size_t fields = l->dtypes.size();
    OP_REQUIRES(ctx, l->rows.size() == fields && l->firsts.size() >= 2,
                errors::InvalidArgument("PackerPassesDataset: a shape per dtype, 2+ firsts"));
    const size_t shards = l->firsts.size() - 1;
    OP_REQUIRES(ctx,
                l->files.size() == shards * fields && l->bases.size() == l->files.size() &&
                    l->strides.size() == l->files.size(),
                errors::InvalidArgument("PackerPassesDataset: a file, base, stride per shard field"));
    for (size_t f = 0; f < fields; ++f) {
      l->bytes.push_back(l->rows[f].num_elements() * DataTypeSize(l->dtypes[f]));
      l->shapes.push_back(PartialTensorShape({rows}).Concatenate(
          PartialTensorShape(l->rows[f].dim_sizes())));
    }
    ForgetStaleMappings();
    for (size_t k = 0; k < l->files.size(); ++k) {
      std::shared_ptr<const Mapping> mapping;
      OP_REQUIRES_OK(ctx, MapFile(l->files[k], &mapping));
      const size_t s = k / fields, f = k % fields;
      const int64_t records = l->firsts[s + 1] - l->firsts[s];
      OP_REQUIRES(ctx,
                  records == 0 || l->bases[k] + (records - 1) * l->strides[k] + l->bytes[f] <=
                                      static_cast<int64_t>(mapping->size),
                  errors::DataLoss(l->files[k], ": holds fewer than the ", records,
                                   " records the manifest says"));
      l->maps.push_back(std::move(mapping));
    }
    layout_ = std::move(l);
  }

  void MakeDataset(OpKernelContext* ctx, DatasetBase** output) override {
    *output = new Dataset(ctx, layout_);
  }

 private:
  class Dataset : public DatasetBase {
   public:
    Dataset(OpKernelContext* ctx, std::shared_ptr<const Layout> layout)
        : DatasetBase(DatasetContext(ctx)), l_(std::move(layout)) {}

    std::unique_ptr<IteratorBase> MakeIteratorInternal(const string& prefix) const override {
      return std::make_unique<Iterator>(Iterator::Params{this, prefix + "::PackerPasses"});
    }
    const DataTypeVector& output_dtypes() const override { return l_->dtypes; }
    const std::vector<PartialTensorShape>& output_shapes() const override { return l_->shapes; }
    string DebugString() const override { return "PackerPassesDatasetOp::Dataset"; }
    int64_t CardinalityInternal(CardinalityOptions) const override { return l_->batches; }
    Status InputDatasets(std::vector<const DatasetBase*>*) const override { return OkStatus(); }
    Status CheckExternalState() const override {
      return errors::FailedPrecondition("packer's compiled read holds its pass in Python");
    }

   protected:
    Status AsGraphDefInternal(SerializationContext* ctx, DatasetGraphDefBuilder* b,
                              Node** output) const override {
      AttrValue dtypes, shapes, rows, files, bases, strides, firsts, callback, token, batches;
      b->BuildAttrValue(l_->dtypes, &dtypes);
      b->BuildAttrValue(l_->rows, &shapes);
      b->BuildAttrValue(l_->shapes[0].dim_size(0), &rows);
      b->BuildAttrValue(l_->files, &files);
      b->BuildAttrValue(l_->bases, &bases);
      b->BuildAttrValue(l_->strides, &strides);
      b->BuildAttrValue(l_->firsts, &firsts);
      b->BuildAttrValue(l_->callback, &callback);
      b->BuildAttrValue(l_->token, &token);
      b->BuildAttrValue(l_->batches, &batches);
      return b->AddDataset(this, {},
                           {{"dtypes", dtypes}, {"shapes", shapes}, {"rows", rows}, {"files", files},
                            {"bases", bases}, {"strides", strides}, {"firsts", firsts},
                            {"callback", callback}, {"token", token}, {"batches", batches}},
                           output);
    }

   private:
    class Iterator : public DatasetIterator<Dataset> {
     public:
      explicit Iterator(const Params& params) : DatasetIterator<Dataset>(params) {}

      Status GetNextInternal(IteratorContext* ctx, std::vector<Tensor>* out,
                             bool* end_of_sequence) override {
        const Layout& l = *dataset()->l_;
        int64_t b;
        {
          mutex_lock hold(mu_);
          if (!started_) {  // the pass is taken at the first batch, as packer.tf's read did
            TF_RETURN_IF_ERROR(TakePass(l, &order_, &starts_));
            started_ = true;
          }
          b = next_;
          *end_of_sequence = b + 1 >= static_cast<int64_t>(starts_.size());
          if (*end_of_sequence) return OkStatus();
          ++next_;
        }
        return Read(l, order_.data() + starts_[b], starts_[b + 1] - starts_[b], out);
      }

     protected:
      std::shared_ptr<model::Node> CreateNode(IteratorContext* ctx,
                                              model::Node::Args args) const override {
        return model::MakeSourceNode(std::move(args));
      }
      Status SaveInternal(SerializationContext*, IteratorStateWriter*) override {
        return errors::Unimplemented("packer.tf.dataset: save its position with state_dict");
      }
      Status RestoreInternal(IteratorContext*, IteratorStateReader*) override {
        return errors::Unimplemented("packer.tf.dataset: resume it with start=");
      }

     private:
      // Rows `index[0..rows)` (sorted sample numbers) of every field, as new output tensors.
      static Status Read(const Layout& l, const int64_t* index, int64_t rows,
                         std::vector<Tensor>* out) {
        const size_t fields = l.dtypes.size();
        std::vector<int64_t> shard(rows), local(rows);
        for (int64_t r = 0; r < rows; ++r) {
          const auto at = std::upper_bound(l.firsts.begin(), l.firsts.end(), index[r]) - 1;
          shard[r] = at - l.firsts.begin();
          local[r] = index[r] - *at;
        }
        std::vector<char*> outs(fields);
        for (size_t f = 0; f < fields; ++f) {
          TensorShape shape({rows});
          shape.AppendShape(l.rows[f]);
          PooledBuffer* buffer = Pool().Take(std::max<int64_t>(1, rows * l.bytes[f]));
          if (buffer->data() == nullptr) {  // out of memory: an error, not a write to null
            buffer->Unref();
            return errors::ResourceExhausted("packer: no memory for a batch of ", rows, " rows");
          }
          out->emplace_back(l.dtypes[f], shape, buffer);
          buffer->Unref();  // the tensor holds it now (and the pool, if pooled)
          outs[f] = static_cast<char*>(buffer->data());
        }
        auto copy = [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            for (size_t f = 0; f < fields; ++f) {
              const size_t k = shard[r] * fields + f;
              std::memcpy(outs[f] + r * l.bytes[f],
                          l.maps[k]->data + l.bases[k] + local[r] * l.strides[k], l.bytes[f]);
            }
          }
        };
        int64_t bytes = 0;
        for (int64_t b : l.bytes) bytes += rows * b;
        Helpers& helpers = CopyHelpers();
        const int64_t parts = std::min<int64_t>(
            {rows, helpers.count(), std::max<int64_t>(1, bytes / kMinBytesPerThread)});
        if (parts <= 1) {
          copy(0, rows);
        } else {
          helpers.Run(parts, [&](int p) { copy(rows * p / parts, rows * (p + 1) / parts); });
        }
        return OkStatus();
      }

      mutex mu_;
      bool started_ = false;
      int64_t next_ = 0;
      std::vector<int64_t> order_, starts_;
    };

    const std::shared_ptr<const Layout> l_;
  };

  std::shared_ptr<const Layout> layout_;
};

}  // namespace

REGISTER_OP("PackerPassesDataset")
    .Output("handle: variant")
    .Attr("dtypes: list(type) >= 1")
    .Attr("shapes: list(shape) >= 1")
    .Attr("rows: int")
    .Attr("files: list(string)")
    .Attr("bases: list(int)")
    .Attr("strides: list(int)")
    .Attr("firsts: list(int)")
    .Attr("callback: string")
    .Attr("token: string")
    .Attr("batches: int")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape);

REGISTER_KERNEL_BUILDER(Name("PackerPassesDataset").Device(DEVICE_CPU), PackerPassesDatasetOp);
