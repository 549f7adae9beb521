#include "zrt/model_zoo/io/param_loader.h"

#include <cmath>
#include <iostream>

#include "zrt/runtime/io/safetensors.h"

namespace zrt::model_zoo {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Attention-mask buffers of Hugging Face GPT-2 (Note [Checkpoint key mapping]).
bool is_mask_buffer(const std::string& name) {
  return ends_with(name, ".attn.bias") || ends_with(name, ".attn.masked_bias");
}

// Training from a NaN or Inf can only produce skipped steps: refuse it here.
// `raw`: the same elements as the file holds them (f32 itself, or f64 whose
// finite value past fp32's range became inf); `first`: the flat index of
// their first element in the tensor.
void check_finite(const Tensor& f32, const Tensor& raw, const std::string& key, std::int64_t first,
                  const std::string& source) {
  const float* p = f32.data<float>();
  for (std::int64_t i = 0; i < f32.numel(); ++i) {
    if (std::isfinite(p[i])) continue;
    if (raw.dtype() == DType::f64 && std::isfinite(raw.data<double>()[i]))
      ZRT_THROW(CheckpointError, source, ": '", key, "' holds ", raw.data<double>()[i],
                " at flat index ", first + i,
                ", past fp32's range (about 3.4e38): the model's fp32 weights would hold inf");
    ZRT_THROW(CheckpointError, source, ": '", key, "' holds ", p[i], " at flat index ", first + i,
              ": initial weights must be finite");
  }
}

// Every digit a float has: two that differ never print alike.
std::string exact(float v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", static_cast<double>(v));
  return text;
}

// A tied name's values in the file must be its primary's: the model holds
// one matrix, so a different one (an untied head) would be dropped.
void check_same_as_primary(const Tensor& f32, const Tensor& primary, const std::string& key,
                           const std::string& primary_key, std::int64_t first,
                           const std::string& source) {
  const float* p = f32.data<float>();
  const float* q = primary.data<float>();
  for (std::int64_t i = 0; i < f32.numel(); ++i)
    if (p[i] != q[i])
      ZRT_THROW(CheckpointError, source, ": '", key, "' differs from '", primary_key,
                "' at flat index ", first + i, " (", exact(p[i]), " vs ", exact(q[i]),
                "), but the model ties them into one parameter: its values would be dropped");
}

}  // namespace

namespace {

struct KeyInfo {
  Shape shape;
  DType dtype;
};

// fqn -> the key holding it, every key and shape checked (Note [Checkpoint key mapping]).
// `tied_keys` (when given) gets, per primary fqn, the keys of its tied names
// the file holds too.
// `skipped` gets Hugging Face's attention-mask buffers, which are no parameters.
std::map<std::string, std::string> match_keys(
    const std::vector<UnitDef>& units, const std::map<std::string, KeyInfo>& keys,
    const std::string& source, std::map<std::string, std::vector<std::string>>* tied_keys,
    std::vector<std::string>& skipped) {
  std::map<std::string, Shape> expected;
  std::map<std::string, std::string> tied;  // second → primary
  for (const ParamDef& p : all_param_defs(units)) expected[p.fqn()] = p.shape;
  for (const UnitDef& u : units)
    for (const auto& [second, primary] : u.tied) tied[second] = primary;

  const std::string prefix = "transformer.";
  std::map<std::string, std::string> origin;                // fqn → key it came from
  std::map<std::string, std::vector<std::string>> seconds;  // fqn → keys of its tied names
  for (const auto& [key, t] : keys) {
    const std::string name = key.starts_with(prefix) ? key.substr(prefix.size()) : key;
    if (auto e = expected.find(name); e != expected.end()) {
      if (auto o = origin.find(name); o != origin.end())
        ZRT_THROW(CheckpointError, source, ": parameter ", name, " is given twice, as '", o->second,
                  "' and '", key, "'");
      if (t.shape != e->second)
        ZRT_THROW(CheckpointError, source, ": '", key, "' has shape ", shape_str(t.shape),
                  " but the model's ", name, " is ", shape_str(e->second));
      if (!is_floating(t.dtype))
        ZRT_THROW(CheckpointError, source, ": '", key, "' has non-floating dtype ",
                  dtype_name(t.dtype));
      origin[name] = key;
    } else if (auto s = tied.find(name); s != tied.end()) {
      const Shape& primary = expected.at(s->second);
      if (t.shape != primary)
        ZRT_THROW(CheckpointError, source, ": '", key, "' has shape ", shape_str(t.shape),
                  " but is tied to ", s->second, " of shape ", shape_str(primary));
      seconds[s->second].push_back(key);
    } else if (is_mask_buffer(name)) {
      skipped.push_back(key);
    } else {
      ZRT_THROW(CheckpointError, source, ": unexpected key '", key,
                "' is not a parameter of the model");
    }
  }
  for (const auto& [fqn, shape] : expected) {
    if (origin.count(fqn)) continue;
    // Only a tied name holds it (safetensors' save_model keeps one name of
    // a tied tensor, which may be "lm_head.weight"): that is its value.
    if (auto s = seconds.find(fqn); s != seconds.end() && !s->second.empty()) {
      const std::string key = s->second.front();
      s->second.erase(s->second.begin());
      ZRT_CHECK_AS(CheckpointError, is_floating(keys.at(key).dtype), source, ": '", key,
                   "' has non-floating dtype ", dtype_name(keys.at(key).dtype));
      origin[fqn] = key;
      continue;
    }
    ZRT_THROW(CheckpointError, source, ": missing parameter ", fqn, " (shape ", shape_str(shape),
              ")");
  }
  if (tied_keys) *tied_keys = std::move(seconds);
  return origin;
}

}  // namespace

std::string skipped_buffers_note(const std::string& source,
                                 const std::vector<std::string>& skipped) {
  if (skipped.empty()) return "";
  return detail::concat(source, ": skipped ", skipped.size(),
                        " attention-mask buffer(s), not parameters ('", skipped.front(), "'",
                        skipped.size() > 1 ? ", ..." : "", ")");
}

std::map<std::string, Tensor> match_model_params(const std::vector<UnitDef>& units,
                                                 const std::map<std::string, Tensor>& tensors,
                                                 const std::string& source) {
  std::map<std::string, KeyInfo> keys;
  for (const auto& [key, t] : tensors) keys[key] = {t.shape(), t.dtype()};
  std::map<std::string, Tensor> out;
  std::map<std::string, std::vector<std::string>> tied_keys;
  std::vector<std::string> skipped;
  const auto matched = match_keys(units, keys, source, &tied_keys, skipped);
  if (!skipped.empty()) std::cerr << "zrt: " << skipped_buffers_note(source, skipped) << "\n";
  for (const auto& [fqn, key] : matched) {
    const Tensor& t = tensors.at(key);
    out[fqn] = t.dtype() == DType::f32 ? t : t.to(DType::f32);
    check_finite(out[fqn], t, key, 0, source);
    for (const std::string& second : tied_keys[fqn])
      check_same_as_primary(tensors.at(second).to(DType::f32), out[fqn], second, key, 0, source);
  }
  return out;
}

ParamFileSource::ParamFileSource(const std::vector<UnitDef>& units, const std::string& path,
                                 AllocatorPtr buffers)
    : reader_(std::make_shared<SafetensorsReader>(path)), buffers_(std::move(buffers)) {
  std::map<std::string, KeyInfo> keys;
  for (const auto& [key, e] : reader_->entries()) keys[key] = {e.shape, e.dtype};
  key_of_ = match_keys(units, keys, path, &tied_keys_, skipped_);
}

void ParamFileSource::read(const std::string& fqn, const Tensor& dst, std::int64_t first,
                           Stream stream) const {
  const std::string& key = key_of_.at(fqn);
  const DType dtype = reader_->entry(key).dtype;
  const Tensor raw = Tensor::empty({dst.numel()}, dtype, Device::cpu(), buffers_);
  Tensor f32 =
      dtype == DType::f32 ? raw : Tensor::empty({dst.numel()}, DType::f32, Device::cpu(), buffers_);
  // The same range of each tied name, to compare: its buffers too are taken
  // before a dry run returns, so the plan counts them.
  std::vector<std::pair<std::string, Tensor>> tied;
  Tensor tied_f32;
  if (auto t = tied_keys_.find(fqn); t != tied_keys_.end())
    for (const std::string& second : t->second) {
      const DType second_dtype = reader_->entry(second).dtype;
      tied.emplace_back(second,
                        Tensor::empty({dst.numel()}, second_dtype, Device::cpu(), buffers_));
      if (second_dtype != DType::f32 && tied_f32.numel() == 0)
        tied_f32 = Tensor::empty({dst.numel()}, DType::f32, Device::cpu(), buffers_);
    }
  if (stream.discards()) return;  // a dry run: the buffers, no values (Note [Dry runs])
  reader_->read_elements(key, first, dst.numel(), raw.data_ptr());
  if (dtype != DType::f32) f32.copy_(raw);
  check_finite(f32, raw, key, first, reader_->path());
  for (auto& [second, values] : tied) {
    reader_->read_elements(second, first, dst.numel(), values.data_ptr());
    if (values.dtype() != DType::f32) tied_f32.copy_(values);
    check_same_as_primary(values.dtype() == DType::f32 ? values : tied_f32, f32, second, key, first,
                          reader_->path());
  }
  Tensor out = dst;  // a view of the same memory
  out.copy_(f32, stream);
  stream.synchronize();  // f32 is this call's; the copy must be done before it goes
}

std::map<std::string, Tensor> load_model_params(const std::vector<UnitDef>& units,
                                                const std::string& path) {
  return match_model_params(units, read_safetensors(path).tensors, path);
}

}  // namespace zrt::model_zoo
