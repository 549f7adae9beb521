#include "zrt/model_zoo/engine/training_engine.h"

#include "zrt/optim/flat_param/sharding_groups.h"
#include "zrt/runtime/memory/caching_allocator.h"

namespace zrt::model_zoo {

namespace {

// "lm_head.weight" -> {"lm_head", "weight"}; "bias" -> {"", "bias"}.
std::pair<std::string, std::string> split_fqn(const std::string& fqn) {
  auto dot = fqn.rfind('.');
  if (dot == std::string::npos) return {"", fqn};
  return {fqn.substr(0, dot), fqn.substr(dot + 1)};
}

const Tensor& initial_value(const std::map<std::string, Tensor>& initial, const std::string& fqn) {
  auto it = initial.find(fqn);
  ZRT_CHECK_ARG(it != initial.end(), "initial parameters have no '", fqn, "'");
  return it->second;
}

}  // namespace

namespace {

// One value of a device tensor, read in `stream` order.
double read_scalar(const Tensor& t, Stream stream) {
  Tensor host = Tensor::empty({1}, t.dtype());
  host.copy_(t.slice(0, 1), stream);  // a copy to the host waits for the stream
  return host.item(0);
}

}  // namespace

TrainingEngine::TrainingEngine(std::unique_ptr<Model> model, CommPtr world, EngineConfig config,
                               const std::map<std::string, Tensor>& initial)
    : model_(std::move(model)), world_(std::move(world)), config_(config) {
  ZRT_CHECK_ARG(model_ && world_, "TrainingEngine needs a model and a world communicator");
  set_current_device(config_.device);
  ZRT_CHECK_ARG(config_.dtype == DType::f32 || config_.dtype == DType::bf16 || config_.dtype == DType::f16,
                "compute dtype must be f32, bf16 or f16, not ", dtype_name(config_.dtype));
  ZRT_CHECK_ARG(config_.reduce_dtype == DType::f32 || config_.reduce_dtype == DType::bf16 ||
                    config_.reduce_dtype == DType::f16,
                "gradient reduce dtype must be f32, bf16 or f16, not ", dtype_name(config_.reduce_dtype));
  ZRT_CHECK_ARG(config_.prefetch >= 0 && config_.prefetch <= 2, "prefetch depth must be 0, 1 or 2 (got ",
                config_.prefetch, ")");
  allocator_ = make_caching_allocator(config_.device);
  if (config_.tracer) world_->set_tracer(config_.tracer);  // before the groups are split from it
  if (config_.device.is_cuda()) {
    compute_stream_ = std::make_unique<OwnedStream>(config_.device);
    comm_stream_ = std::make_unique<OwnedStream>(config_.device);
  }
  const int zero3 = config_.zero3_size > 0 ? config_.zero3_size : world_->size();
  optim::StrategyPlan plan = optim::plan_strategy(config_.strategy, world_, zero3);

  const auto units = model_->units();
  for (const auto& unit : units) {
    // Fresh copies: a handle claims its parameters' memory, and several ranks
    // of one process may share `initial`.
    std::vector<optim::NamedParam> params;
    std::map<std::string, Tensor> copies;
    for (const auto& p : unit.params) {
      const Tensor& v = initial_value(initial, p.fqn());
      ZRT_CHECK_ARG(v.shape() == p.shape, "initial value of '", p.fqn(), "' has shape ", shape_str(v.shape()),
                    " but the model expects ", shape_str(p.shape));
      copies[p.fqn()] = v.to(DType::f32);
      params.push_back({p.module_path, p.name, copies[p.fqn()]});
    }
    for (const auto& [second, primary] : unit.tied) {
      auto [module_path, name] = split_fqn(second);
      params.push_back({module_path, name, copies.at(primary)});
    }
    optim::FlatParamOptions o;
    o.name = unit.name;
    o.param_dtype = config_.dtype;
    o.reduce_dtype = config_.reduce_dtype;
    o.grad_reduce = ReduceOp::sum;  // see Note [One step of the engine]
    o.reshard_after_forward = plan.reshard_after_forward;
    o.reshard_after_backward = plan.reshard_after_backward;
    o.offload_grads = config_.offload_grads;
    o.device = config_.device;
    o.allocator = allocator_;
    if (compute_stream_) {
      o.stream = compute_stream_->get();
      o.comm_stream = comm_stream_->get();
    }
    handles_.push_back(std::make_unique<optim::FlatParamHandle>(std::move(params), plan.groups, o));
  }

  // Layers bind to the handles' unsharded views once; the views survive reshards.
  std::map<std::string, std::pair<optim::FlatParamHandle*, std::size_t>> where;
  for (std::size_t u = 0; u < units.size(); ++u) {
    for (const auto& p : units[u].params) where[p.fqn()] = {handles_[u].get(), handles_[u]->index_of(p.fqn())};
    for (const auto& [second, primary] : units[u].tied)
      where[second] = {handles_[u].get(), handles_[u]->index_of(primary)};
  }
  model_->bind([&](const std::string& fqn) {
    auto it = where.find(fqn);
    ZRT_CHECK_ARG(it != where.end(), "model asked for unknown parameter '", fqn, "'");
    auto [h, i] = it->second;
    return Param{h->param(i), h->grad(i)};
  });

  last_backward_stage_.assign(units.size(), -1);
  for (int s = model_->num_stages() - 1; s >= 0; --s) last_backward_stage_[model_->stage_unit(s)] = s;

  std::vector<optim::FlatParamHandle*> raw;
  for (auto& h : handles_) raw.push_back(h.get());
  optimizer_ = std::make_unique<optim::ZeroAdamW>(raw, config_.adamw);
  if (config_.dtype == DType::f16)
    scaler_ = std::make_unique<optim::DynamicLossScaler>(optim::loss_scaler_options_for(config_.dtype));
}

TrainingEngine::~TrainingEngine() = default;

Tracer::Scope TrainingEngine::traced(const char* what, const std::string& unit) const {
  Tracer* t = config_.tracer.get();
  return Tracer::Scope(t, t ? (unit.empty() ? std::string(what) : std::string(what) + " " + unit) : std::string(),
                       "compute", Tracer::kComputeTrack, {});
}

void TrainingEngine::prefetch(int stage, int step) {
  for (int k = 1; k <= config_.prefetch; ++k) {
    const int s = stage + k * step;
    if (s < 0 || s >= model_->num_stages()) return;
    handles_[model_->stage_unit(s)]->unshard();
  }
}

double TrainingEngine::forward(const Batch& given) {
  const Stream stream = this->stream();
  // Layers allocate activations from their input's allocator: re-home the
  // batch on the engine's caching allocator so every activation comes from it.
  Batch batch = given;
  for (Tensor* t : {&batch.inputs, &batch.targets}) {
    Tensor homed = Tensor::empty(t->shape(), t->dtype(), config_.device, allocator_, stream);
    homed.copy_(*t, stream);
    *t = homed;
  }
  Tensor x;
  for (int s = 0; s < model_->num_stages(); ++s) {
    optim::FlatParamHandle& h = *handles_[model_->stage_unit(s)];
    auto trace = traced("forward", h.name());
    h.pre_forward();
    prefetch(s, +1);
    x = model_->stage_forward(s, x, batch, stream);
    h.post_forward();
  }
  return read_scalar(x, stream);
}

void TrainingEngine::backward(const Tensor& dloss, bool sync_grads) {
  const Stream stream = this->stream();
  Tensor dy = dloss;
  for (int s = model_->num_stages() - 1; s >= 0; --s) {
    const int u = model_->stage_unit(s);
    optim::FlatParamHandle& h = *handles_[u];
    auto trace = traced("backward", h.name());
    h.pre_backward();
    prefetch(s, -1);
    dy = model_->stage_backward(s, dy, stream);
    h.post_backward(sync_grads && s == last_backward_stage_[u]);
  }
}

std::pair<double, double> TrainingEngine::all_reduce_sum(double a, double b) {
  Tensor t = Tensor::from_doubles({a, b}, DType::f64, config_.device);  // NCCL needs device memory
  world_->all_reduce(t, ReduceOp::sum, stream());
  Tensor host = Tensor::empty({2}, DType::f64);
  host.copy_(t, stream());
  return {host.item(0), host.item(1)};
}

StepStats TrainingEngine::step(const std::vector<Batch>& micro_batches, double lr) {
  ZRT_CHECK_ARG(!micro_batches.empty(), "a training step needs at least one micro-batch");
  const double scale = scaler_ ? scaler_->scale() : 1.0;
  Tensor dloss = Tensor::from_doubles({scale}, DType::f32, config_.device);
  double local_loss = 0;
  std::int64_t local_tokens = 0;
  for (std::size_t m = 0; m < micro_batches.size(); ++m) {
    local_loss += forward(micro_batches[m]);
    local_tokens += micro_batches[m].targets.numel();
    backward(dloss, m + 1 == micro_batches.size());
  }
  StepStats stats;
  const auto [loss, tokens] = all_reduce_sum(local_loss, static_cast<double>(local_tokens));
  stats.loss = loss;
  stats.tokens = static_cast<std::int64_t>(tokens);
  optim::StepResult r;
  {
    auto trace = traced("optimizer step");
    r = scaler_ ? optimizer_->step(lr, *scaler_) : optimizer_->step(lr);
  }
  if (config_.tracer) {
    const MemoryStats m = allocator_->stats();
    config_.tracer->counter("memory", {{"allocated", static_cast<double>(m.allocated)},
                                       {"reserved", static_cast<double>(m.reserved)}});
  }
  stats.grad_norm = r.grad_norm;
  stats.skipped = r.skipped;
  stats.loss_scale = scale;
  return stats;
}

std::map<std::string, Tensor> TrainingEngine::full_params() {
  std::map<std::string, Tensor> out;
  for (auto& h : handles_) {
    auto values = h->summon_full_params();
    for (std::size_t i = 0; i < values.size(); ++i) out[h->fqn(i)] = values[i].to(Device::cpu());
  }
  return out;
}

}  // namespace zrt::model_zoo
