// PackerPassesDataset: packer.tf.dataset's batches of an npy or uncompressed TFRecord pack read
// in C++ (packer.tf.compiled).
//
// A tf.data source: each new iterator (Keras makes one an epoch) asks packer's Python side
// once for its pass (the sorted sample indices of every batch, from the seeded Loader), then
// yields each batch with no Python, no GIL and no function per element: every field's rows
// copied with memcpy from the shard files, mapped once per process (shards.h), into buffers
// that a pool hands out again once no tensor holds them, split over a helper thread per
// usable core (pool.h). An npy shard's field is one file whose record i starts at byte
// base + i * stride; a TFRecord shard's records are found by walking its framing and checked
// (CRC32C) before use, a field's bytes at `base` from each record's data start or, where that
// varies (a class id's varint before it), found in the record's Example by its key, a class
// id decoded from its varint (example.h).
// As a pipeline's last stage (`ahead`), the source reads batch b + 1 on the helpers while
// batch b is consumed, instead of a tf.data prefetch after it.
#include <Python.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "example.h"
#include "pool.h"
#include "shards.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/model.h"
#include "tensorflow/core/framework/shape_inference.h"

using namespace tensorflow;

// Each thread copies at least this many bytes of a batch (packer.reading.gather's measure).
constexpr int64_t kMinBytesPerThread = 2 << 20;

using namespace tensorflow::data;

namespace {

// What every iterator of one dataset reads: the fields, and each shard field's file.
struct Layout {
  DataTypeVector dtypes;
  std::vector<TensorShape> rows;             // one record of each field
  std::vector<PartialTensorShape> shapes;    // a batch of each field: [rows or ?, *row]
  std::vector<std::string> files;            // shard-major: shard s, field f at s * F + f
  std::vector<int64_t> bases, strides, firsts, bytes;  // a TFRecord field's base: -1 if found
  std::vector<int64_t> framed;               // 1: a TFRecord shard, 0: npy files
  std::vector<std::string> keys;             // each field's Example key (TFRecord)
  std::vector<int64_t> varints;              // each field: 1 a class id's Int64List, 0 bytes
  std::vector<bool> finds;                   // each shard: some field found by its key
  std::vector<std::shared_ptr<const Mapping>> maps;
  std::string callback, token;               // "module:function" called with the token
  int64_t batches = kUnknownCardinality;
  bool ahead = false;                        // read the next batch while one is consumed
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

// One batch being read: its tensors, and its copy running on the helpers (and whoever waits).
class Batch {
 public:
  // Rows `index[0..rows)` (sorted sample numbers) of every field into new tensors: copied by
  // the helpers alone with `l->ahead` (End takes what they have not), else split between
  // the helpers and End's caller as the batch's bytes allow.
  static std::unique_ptr<Batch> Start(std::shared_ptr<const Layout> l, const int64_t* index,
                                      int64_t rows) {
    std::unique_ptr<Batch> batch(new Batch(std::move(l), index, rows));
    Batch* b = batch.get();
    if (!b->status_.ok() || rows == 0) return batch;
    int64_t bytes = 0;
    for (int64_t field : b->l_->bytes) bytes += rows * field;
    Helpers& helpers = CopyHelpers();
    const int64_t most = std::min<int64_t>(rows, std::max<int64_t>(1, bytes / kMinBytesPerThread));
    // Read ahead, the helpers take the parts one by one until End's caller joins them.
    const int64_t parts = b->l_->ahead ? most : std::min<int64_t>(most, helpers.count());
    if (parts > 1 || b->l_->ahead) {
      b->job_ = helpers.Start(parts, [b, rows, parts](int p) {
        b->Copy(rows * p / parts, rows * (p + 1) / parts);
      });
    } else {
      b->Copy(0, rows);
    }
    return batch;
  }
  ~Batch() {
    if (job_) CopyHelpers().Finish(job_);  // never freed while a helper writes into it
  }
  // The batch's tensors once copied, or the first error found reading it.
  Status End(std::vector<Tensor>* out) {
    if (job_) CopyHelpers().Finish(job_);
    job_.reset();
    TF_RETURN_IF_ERROR(status_);
    if (!error_.empty()) return errors::DataLoss(error_);
    *out = std::move(tensors_);
    return OkStatus();
  }

 private:
  Batch(std::shared_ptr<const Layout> l, const int64_t* index, int64_t rows) : l_(std::move(l)) {
    const Layout& lay = *l_;
    shard_.resize(rows);
    local_.resize(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const auto at = std::upper_bound(lay.firsts.begin(), lay.firsts.end(), index[r]) - 1;
      shard_[r] = at - lay.firsts.begin();
      local_[r] = index[r] - *at;
    }
    for (size_t f = 0; f < lay.dtypes.size(); ++f) {
      TensorShape shape({rows});
      shape.AppendShape(lay.rows[f]);
      PooledBuffer* buffer = Pool().Take(std::max<int64_t>(1, rows * lay.bytes[f]));
      if (buffer->data() == nullptr) {  // out of memory: an error, not a write to null
        buffer->Unref();
        status_ = errors::ResourceExhausted("packer: no memory for a batch of ", rows, " rows");
        return;
      }
      tensors_.emplace_back(lay.dtypes[f], shape, buffer);
      buffer->Unref();  // the tensor holds it now (and the pool, if pooled)
      outs_.push_back(static_cast<char*>(buffer->data()));
    }
  }
  // Rows [begin, end): a TFRecord shard's record checked first (once per process).
  void Copy(int64_t begin, int64_t end) {
    const Layout& l = *l_;
    const size_t fields = l.dtypes.size();
    std::vector<Span> spans;
    for (int64_t r = begin; r < end; ++r) {
      const size_t s = shard_[r], k0 = s * fields;
      if (l.framed[s]) {
        std::string error = CopyRecord(s, r, &spans);
        if (!error.empty()) {
          std::lock_guard<std::mutex> hold(lock_);
          if (error_.empty()) {
            error_ = l.files[k0] + ": record " + std::to_string(local_[r]) + error;
          }
        }
        continue;
      }
      for (size_t f = 0; f < fields; ++f) {
        const size_t k = k0 + f;
        std::memcpy(outs_[f] + r * l.bytes[f],
                    l.maps[k]->data + l.bases[k] + local_[r] * l.strides[k], l.bytes[f]);
      }
    }
  }
  // Row r from its TFRecord record: "" or the error's end (after "<file>: record <i>").
  std::string CopyRecord(size_t s, int64_t r, std::vector<Span>* spans) {
    const Layout& l = *l_;
    const size_t fields = l.dtypes.size(), k0 = s * fields;
    const Mapping& m = *l.maps[k0];
    const int64_t i = local_[r];
    if (!CheckRecord(m, i)) return " is corrupted (data CRC mismatch)";
    const char* data = m.data + m.starts[i];
    const int64_t length = m.lengths[i];
    if (l.finds[s] && !FindFeatures(data, length, l.keys, spans)) {
      return ": not a packer Example";
    }
    for (size_t f = 0; f < fields; ++f) {
      char* out = outs_[f] + r * l.bytes[f];
      const int64_t base = l.bases[k0 + f];
      if (base >= 0) {  // at the same place in every record of the shard
        if (base + l.bytes[f] > length) return ": shorter than its fields";
        std::memcpy(out, data + base, l.bytes[f]);
        continue;
      }
      const Span& span = (*spans)[f];
      if (span.size < 0) return ": no feature '" + l.keys[f] + "'";
      if (l.varints[f]) {
        const std::string why =
            span.kind == 3 ? StoreOneInt(span, l.dtypes[f], out) : "not an int64 feature";
        if (!why.empty()) return ": " + l.keys[f] + ": " + why;
      } else if (span.kind != 1) {
        return ": " + l.keys[f] + " is not a bytes feature";
      } else if (span.size != l.bytes[f]) {
        return ": " + l.keys[f] + " holds " + std::to_string(span.size) + " bytes, " +
               std::to_string(l.bytes[f]) + " expected";
      } else {
        std::memcpy(out, span.begin, l.bytes[f]);
      }
    }
    return "";
  }

  const std::shared_ptr<const Layout> l_;
  std::vector<int64_t> shard_, local_;
  std::vector<Tensor> tensors_;
  std::vector<char*> outs_;
  Status status_;
  std::shared_ptr<Job> job_;
  std::mutex lock_;
  std::string error_;  // the first record that failed its check
};

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
    OP_REQUIRES_OK(ctx, ctx->GetAttr("framed", &l->framed));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("ahead", &l->ahead));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("keys", &l->keys));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("varints", &l->varints));
    int64_t rows;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("rows", &rows));
    const size_t fields = l->dtypes.size();
    OP_REQUIRES(ctx,
                l->rows.size() == fields && l->keys.size() == fields &&
                    l->varints.size() == fields && l->firsts.size() >= 2,
                errors::InvalidArgument("PackerPassesDataset: a shape, key, varints per dtype, "
                                        "2+ firsts"));
    const size_t shards = l->firsts.size() - 1;
    OP_REQUIRES(ctx,
                l->files.size() == shards * fields && l->bases.size() == l->files.size() &&
                    l->strides.size() == l->files.size() && l->framed.size() == shards,
                errors::InvalidArgument("PackerPassesDataset: a file, base, stride per shard "
                                        "field, framed per shard"));
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
      if (f == 0) l->finds.push_back(false);
      if (l->framed[s]) {  // a TFRecord shard: its records found once per mapping
        const std::string& unsound = mapping->Records(l->files[k]);
        OP_REQUIRES(ctx, unsound.empty(), errors::DataLoss(unsound));
        OP_REQUIRES(ctx, static_cast<int64_t>(mapping->starts.size()) == records,
                    errors::DataLoss(l->files[k], ": holds ", mapping->starts.size(),
                                     " records, the manifest says ", records));
        OP_REQUIRES(ctx, l->bases[k] >= 0 || !l->keys[f].empty(),
                    errors::InvalidArgument("PackerPassesDataset: a field without a place"));
        if (l->bases[k] < 0) l->finds[s] = true;
      } else {
        OP_REQUIRES(ctx,
                    records == 0 || l->bases[k] + (records - 1) * l->strides[k] + l->bytes[f] <=
                                        static_cast<int64_t>(mapping->size),
                    errors::DataLoss(l->files[k], ": holds fewer than the ", records,
                                     " records the manifest says"));
      }
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
      AttrValue framed, ahead, keys, varints;
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
      b->BuildAttrValue(l_->framed, &framed);
      b->BuildAttrValue(l_->ahead, &ahead);
      b->BuildAttrValue(l_->keys, &keys);
      b->BuildAttrValue(l_->varints, &varints);
      return b->AddDataset(this, {},
                           {{"dtypes", dtypes}, {"shapes", shapes}, {"rows", rows}, {"files", files},
                            {"bases", bases}, {"strides", strides}, {"firsts", firsts},
                            {"callback", callback}, {"token", token}, {"batches", batches},
                            {"framed", framed}, {"ahead", ahead}, {"keys", keys},
                            {"varints", varints}},
                           output);
    }

   private:
    class Iterator : public DatasetIterator<Dataset> {
     public:
      explicit Iterator(const Params& params) : DatasetIterator<Dataset>(params) {}

      Status GetNextInternal(IteratorContext* ctx, std::vector<Tensor>* out,
                             bool* end_of_sequence) override {
        const Layout& l = *dataset()->l_;
        mutex_lock hold(mu_);
        if (!started_) {  // the pass is taken at the first batch, as packer.tf's read did
          TF_RETURN_IF_ERROR(TakePass(l, &order_, &starts_));
          started_ = true;
        }
        const int64_t batches = static_cast<int64_t>(starts_.size()) - 1;
        *end_of_sequence = next_ >= batches;
        if (*end_of_sequence) return OkStatus();
        std::unique_ptr<Batch> batch = ahead_ ? std::move(ahead_) : Begin(next_);
        ++next_;
        if (l.ahead && next_ < batches) ahead_ = Begin(next_);  // copied while this is used
        return batch->End(out);
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
      // Batch b of the pass, its copy started (on the helpers alone when read ahead).
      std::unique_ptr<Batch> Begin(int64_t b) {
        const int64_t begin = starts_[b];
        return Batch::Start(dataset()->l_, order_.data() + begin, starts_[b + 1] - begin);
      }

      mutex mu_;
      bool started_ = false;
      int64_t next_ = 0;
      std::vector<int64_t> order_, starts_;
      // The next batch, being copied (with `ahead`); destroyed with the iterator once its
      // copy is done (Batch's destructor waits), so no helper writes into freed memory.
      std::unique_ptr<Batch> ahead_;
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
    .Attr("framed: list(int)")
    .Attr("ahead: bool")
    .Attr("keys: list(string)")
    .Attr("varints: list(int)")
    .SetIsStateful()
    .SetShapeFn(shape_inference::ScalarShape);

REGISTER_KERNEL_BUILDER(Name("PackerPassesDataset").Device(DEVICE_CPU), PackerPassesDatasetOp);
