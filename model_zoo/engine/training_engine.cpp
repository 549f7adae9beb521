#include "zrt/model_zoo/engine/training_engine.h"

#include <cmath>
#include <utility>

#include "zrt/kernels/nn/id_check.h"
#include "zrt/kernels/ops/cast.h"
#include "zrt/kernels/ops/fill.h"
#include "zrt/optim/consistency_check.h"
#include "zrt/optim/optim_error.h"
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

// The engine's module: the config's, reducing with sum (Note [One step of the engine]).
optim::ZeroModuleOptions module_options(const EngineConfig& c) {
  optim::ZeroModuleOptions o = c.zero;
  o.grad_reduce.op = ReduceOp::sum;
  o.adamw.rounding_seed = c.seed;  // the run's one seed (Note [bf16 AdamW moments])
  return o;
}

}  // namespace

TrainingEngine::TrainingEngine(std::unique_ptr<Model> model, CommPtr world, EngineConfig config,
                               const std::map<std::string, Tensor>& initial)
    : TrainingEngine(std::move(model), std::move(world), std::move(config), &initial, nullptr) {}

TrainingEngine::TrainingEngine(std::unique_ptr<Model> model, CommPtr world, EngineConfig config)
    : TrainingEngine(std::move(model), std::move(world), std::move(config), nullptr, nullptr) {}

TrainingEngine::TrainingEngine(std::unique_ptr<Model> model, CommPtr world, EngineConfig config,
                               const ParamFileSource& file)
    : TrainingEngine(std::move(model), std::move(world), std::move(config), nullptr, &file) {}

TrainingEngine::TrainingEngine(std::unique_ptr<Model> model, CommPtr world, EngineConfig config,
                               const std::map<std::string, Tensor>* initial,
                               const ParamFileSource* file)
    : model_(std::move(model)), config_(config) {
  ZRT_CHECK_ARG(model_ && world, "TrainingEngine needs a model and a world communicator");
  ZRT_CHECK_ARG(config_.prefetch >= 0 && config_.prefetch <= 2,
                "prefetch depth must be 0, 1 or 2 (got ", config_.prefetch, ")");
  // Before the module splits its groups from the world, which inherit it.
  if (config_.phase_timer) world->set_phase_timer(config_.phase_timer);
  module_ = std::make_unique<optim::ZeroModule>(std::move(world), module_options(config_));
  // Note [One host wait per step]
  if (config_.zero.device.is_cuda()) pinned_ = make_pinned_host_allocator();

  // A primary parameter's value, or (none given) its stand-in and init
  // function (Note [Sharded initialisation]); ties reuse the primary's.
  const std::map<std::string, ParamInit> inits =
      initial || file ? std::map<std::string, ParamInit>{} : model_->param_inits();
  // A read that fails on one rank (a NaN in its part of the file) is kept
  // and agreed on after the units, so no rank waits in a collective another
  // left (Note [Streamed loading]).
  std::string read_error;
  const AllocatorPtr unbacked = initial ? nullptr : make_unbacked_caching_allocator();
  std::map<std::string, optim::NamedParam> drawn;
  auto primary = [&](const std::string& fqn, const Shape& shape) -> optim::NamedParam {
    if (initial) {
      const Tensor& v = initial_value(*initial, fqn);
      ZRT_CHECK_ARG(v.shape() == shape, "initial value of '", fqn, "' has shape ",
                    shape_str(v.shape()), " but the model expects ", shape_str(shape));
      return {{}, {}, v};
    }
    if (auto it = drawn.find(fqn); it != drawn.end()) return it->second;
    optim::NamedParam p{{}, {}, Tensor::empty(shape, DType::f32, Device::cpu(), unbacked)};
    if (file) {
      p.init = [file, fqn, &read_error](const Tensor& dst, std::int64_t first, Stream stream) {
        if (!read_error.empty()) return;
        try {
          file->read(fqn, dst, first, stream);
        } catch (const std::exception& e) {
          read_error = e.what();
        }
      };
      return drawn[fqn] = p;
    }
    const auto how = inits.find(fqn);
    ZRT_CHECK_STATE(how != inits.end(), model_->kind(), ": no initialisation for '", fqn, "'");
    p.init = [init = how->second, seed = config_.seed, fqn](const Tensor& dst, std::int64_t first,
                                                            Stream stream) {
      fill_param_init(dst, init, seed, fqn, first, stream);
    };
    return drawn[fqn] = p;
  };
  const auto units = model_->units();
  std::map<std::string, Shape> shape_of;
  for (const auto& unit : units)
    for (const auto& p : unit.params) shape_of[p.fqn()] = p.shape;
  for (const auto& unit : units) {
    std::vector<optim::NamedParam> params;
    for (const auto& p : unit.params) {
      optim::NamedParam np = primary(p.fqn(), p.shape);
      np.module_path = p.module_path;
      np.name = p.name;
      np.pad_rows = p.pad_rows;
      params.push_back(std::move(np));
    }
    for (const auto& [second, primary_fqn] : unit.tied) {
      auto [module_path, name] = split_fqn(second);
      optim::NamedParam np = primary(primary_fqn, shape_of.at(primary_fqn));
      np.module_path = module_path;
      np.name = name;
      np.init = nullptr;  // the primary's values, drawn in its own unit
      params.push_back(std::move(np));
    }
    units_.push_back(module_->add_unit(unit.name, params));
  }
  if (file) {  // every rank learns of any rank's bad read, and throws the same error
    const auto all = module_->world()->all_gather_bytes(
        std::as_bytes(std::span(read_error.data(), read_error.size())));
    for (std::size_t r = 0; r < all.size(); ++r)
      if (!all[r].empty())
        ZRT_THROW(CheckpointError,
                  std::string(reinterpret_cast<const char*>(all[r].data()), all[r].size()));
  }

  // A view used outside its unit's scopes is refused (Note [Views live in
  // their scopes]); here those scopes are the unit's stages, and the message
  // says so in the Model's terms: where the memory exists, not where the
  // use was (another unit's stage, a forward, or between steps).
  const std::string rule =
      " (stage s computes with the parameters of unit stage_unit(s), and of earlier units "
      "those that UnitDef::tied names)";
  for (std::size_t u = 0; u < units.size(); ++u) {
    const optim::FlatParamHandle& h = module_->handle(units_[u]);
    const std::string of = " of unit '" + h.name() + "': model '" + model_->kind() + "' ";
    const std::string grad_note = "has no memory outside the backward of the stages" + of +
                                  "accumulates into it elsewhere" + rule;
    if (h.num_params() > 0) {
      h.param(0).storage().set_freed_note("has no memory outside the stages" + of +
                                          "reads it elsewhere" + rule);
      h.grad(0).storage().set_freed_note(grad_note);
    }
    for (const auto& tied : units[u].tied)  // a tied name's own gradient
      module_->param_views(units_[u], tied.first).grad.storage().set_freed_note(grad_note);
  }

  // Layers bind to the module's views once; the views survive reshards. A
  // name tied to an earlier unit's parameter reads the owner's unsharded
  // parameter and accumulates into its unit's own gradient (Note
  // [Parameters tied across units]).
  std::map<std::string, optim::ZeroModule::Unit> unit_of;
  for (std::size_t u = 0; u < units.size(); ++u) {
    for (const auto& p : units[u].params) unit_of[p.fqn()] = units_[u];
    for (const auto& tied : units[u].tied) unit_of[tied.first] = units_[u];
  }
  // Its own copy of the names: a model may keep the lookup past bind().
  model_->bind([this, unit_of = std::move(unit_of)](const std::string& fqn) {
    auto it = unit_of.find(fqn);
    ZRT_CHECK_ARG(it != unit_of.end(), "model asked for unknown parameter '", fqn, "'");
    const auto views = module_->param_views(it->second, fqn);
    return Param{views.param, views.grad};
  });

  // What the model says of its stages is checked once, here, in its terms:
  // a wrong value would index past the engine's tables, or leave a unit
  // decaying without a gradient.
  const int stages = model_->num_stages();
  const std::string kind = model_->kind();
  ZRT_CHECK_ARG(stages >= 1, "model '", kind, "': num_stages() is ", stages,
                "; a model has at least one stage");
  last_backward_stage_.assign(units.size(), -1);
  for (int s = stages - 1; s >= 0; --s) {
    const int u = model_->stage_unit(s);
    ZRT_CHECK_ARG(u >= 0 && static_cast<std::size_t>(u) < units.size(), "model '", kind,
                  "': stage_unit(", s, ") is ", u, ", not one of its ", units.size(),
                  " units (0 to ", units.size() - 1, ")");
    last_backward_stage_[static_cast<std::size_t>(u)] = s;
  }
  for (std::size_t u = 0; u < units.size(); ++u)
    ZRT_CHECK_ARG(last_backward_stage_[u] >= 0, "model '", kind, "': unit '", units[u].name,
                  "' is the unit of no stage (stage_unit): its parameters would get no "
                  "gradient and only decay; give it a stage or leave it out of units()");
  checkpointed_.assign(static_cast<std::size_t>(stages), false);
  kept_inputs_.resize(checkpointed_.size());
  stage_inputs_.resize(checkpointed_.size());
  const std::vector<int> blocks = model_->block_stages();
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    ZRT_CHECK_ARG(blocks[b] >= 1 && blocks[b] < stages && (b == 0 || blocks[b] > blocks[b - 1]),
                  "model '", kind, "': block_stages()[", b, "] is ", blocks[b],
                  "; block stages are stages 1 to ", stages - 1,
                  " (stage 0 reads the batch), in increasing order");
    if (config_.checkpointing.checkpoints(static_cast<int>(b)))
      checkpointed_[static_cast<std::size_t>(blocks[b])] = true;
  }
  module_->optimizer();  // every unit is added: the optimizer's state exists from here on
  // Note [Gathers after the update]: the units the next step's forward
  // enters and prefetches first.
  if (config_.gather_after_update && config_.prefetch > 0)
    for (int s = 0; s <= config_.prefetch && s < model_->num_stages(); ++s)
      first_units_.push_back(stage_unit(s));
}

TrainingEngine::~TrainingEngine() {
  // The world outlives the engine: its collectives are no longer this engine's phases.
  if (module_ && config_.phase_timer && module_->world()->phase_timer() == config_.phase_timer)
    module_->world()->set_phase_timer(nullptr);
}

Tracer::Scope TrainingEngine::traced(const char* what, const std::string& unit,
                                     const char* category) const {
  Tracer* t = config_.zero.tracer.get();
  return Tracer::Scope(
      t, t ? (unit.empty() ? std::string(what) : std::string(what) + " " + unit) : std::string(),
      category, Tracer::kComputeTrack, {});
}

optim::ZeroModule::Unit TrainingEngine::stage_unit(int stage) const {
  return units_.at(static_cast<std::size_t>(model_->stage_unit(stage)));
}

optim::ZeroModule::Scope TrainingEngine::enter(optim::ZeroModule::Unit u, bool backward,
                                               bool sync) {
  auto trace =
      traced(backward ? "backward gather" : "forward gather", module_->handle(u).name(), "wait");
  // The layers run on the compute stream (Note [The stream a scope serves]).
  return backward ? module_->backward(u, sync, module_->stream())
                  : module_->forward(u, module_->stream());
}

void TrainingEngine::prefetch(int stage, int step) {
  for (int k = 1; k <= config_.prefetch; ++k) {
    const int s = stage + k * step;
    if (s < 0 || s >= model_->num_stages()) return;
    module_->prefetch(stage_unit(s));
  }
}

Batch TrainingEngine::home(const Batch& given) const {
  // Layers allocate activations from their input's allocator: re-home the
  // batch on the engine's caching allocator so every activation comes from it.
  Batch batch = given;
  for (Tensor* t : {&batch.inputs, &batch.targets}) {
    Tensor homed =
        Tensor::empty(t->shape(), t->dtype(), config_.zero.device, module_->allocator(), stream());
    if (pinned_ && t->device().is_cpu()) {
      // Note [One host wait per step]: staged in pinned memory, uploaded with
      // no host wait. The staging block is the host's until the upload has
      // run (Note [Explicit cross-stream lifetimes]).
      Tensor staged = Tensor::empty(t->shape(), t->dtype(), Device::cpu(), pinned_, Stream::cpu());
      staged.copy_(*t);
      homed.copy_async_(staged, stream());
      staged.storage().record_use(stream());
    } else {
      homed.copy_(*t, stream());
    }
    // A kernel's message names the tensor: the caller's name, else its field.
    homed.set_name(!t->name().empty()   ? t->name()
                   : t == &batch.inputs ? "Batch::inputs"
                                        : "Batch::targets");
    *t = homed;
  }
  return batch;
}

Tensor TrainingEngine::forward(const Batch& batch) {
  const Stream stream = this->stream();
  Tensor x;
  for (int s = 0; s < model_->num_stages(); ++s) {
    const optim::ZeroModule::Unit u = stage_unit(s);
    auto scope = enter(u, false, false);
    {
      auto trace = traced("prefetch", module_->handle(u).name(), "issue");
      prefetch(s, +1);
    }
    {
      auto trace = traced("forward", module_->handle(u).name());
      PhaseTimer::Scope phase(phase_timer(), Phase::forward, stream);
      const bool checkpointed = checkpointed_[static_cast<std::size_t>(s)];
      if (checkpointed) kept_inputs_[static_cast<std::size_t>(s)] = x;
      if (s > 0) stage_inputs_[static_cast<std::size_t>(s)] = {x.shape(), x.dtype()};
      x = model_->stage_forward(s, x, batch, stream);
      if (checkpointed) model_->release_stage(s);
    }
    scope.close();
  }
  ZRT_CHECK_ARG(x.numel() == 1 && is_floating(x.dtype()), "model '", model_->kind(),
                "': its last stage (", model_->num_stages() - 1, ") returned ", x.str(),
                " as the loss; it must be the micro-batch's loss, a 1-element floating tensor "
                "(sum of the per-target losses / Batch::normaliser)");
  return x.slice(0, 1);
}

void TrainingEngine::backward(const Batch& batch, const Tensor& dloss, bool sync_grads) {
  const Stream stream = this->stream();
  Tensor dy = dloss;
  for (int s = model_->num_stages() - 1; s >= 0; --s) {
    const optim::ZeroModule::Unit u = stage_unit(s);
    auto scope = enter(u, true, sync_grads && s == last_backward_stage_[u.index()]);
    {
      auto trace = traced("prefetch", module_->handle(u).name(), "issue");
      prefetch(s, -1);
    }
    if (checkpointed_[static_cast<std::size_t>(s)]) {
      // The unit is gathered for this backward: run the block's forward again
      // to refill its layers' caches (Note [Activation checkpointing]).
      auto trace = traced("recompute", module_->handle(u).name());
      PhaseTimer::Scope phase(phase_timer(), Phase::backward, stream);
      Tensor& kept = kept_inputs_[static_cast<std::size_t>(s)];
      model_->stage_forward(s, kept, batch, stream);
      kept = Tensor();
    }
    {
      auto trace = traced("backward", module_->handle(u).name());
      PhaseTimer::Scope phase(phase_timer(), Phase::backward, stream);
      dy = model_->stage_backward(s, dy, stream);
    }
    // The gradient of the stage's input has that input's shape and dtype: a
    // wrong one would flow into the stage before it, silently.
    if (s > 0) {
      const StageInput& in = stage_inputs_[static_cast<std::size_t>(s)];
      ZRT_CHECK_ARG(dy.shape() == in.shape && dy.dtype() == in.dtype, "model '", model_->kind(),
                    "': stage ", s, "'s backward returned ", dy.str(),
                    ", but its forward's input was ", shape_str(in.shape), " ",
                    dtype_name(in.dtype), ": it returns the gradient of that input");
    }
    auto trace = traced("reduce", module_->handle(u).name(), "issue");
    scope.close();  // issues the gradient reduction (a sync scope)
  }
}

void TrainingEngine::queue_loss_sums(const Tensor& losses, std::int64_t local_tokens,
                                     double normaliser, const Tensor& id_flag, Event& copied) {
  // On the device (NCCL needs device memory), from the caching allocator and
  // written in stream order: no raw allocation. Exact in f64: the host sums.
  // The normaliser and its square ride along: every rank's is the same iff
  // W·Σn² = (Σn)² (read_losses checks it).
  const std::int64_t m = losses.numel();
  Tensor t =
      Tensor::empty({m + 3}, DType::f64, config_.zero.device, module_->allocator(), stream());
  kernels::cast(t.slice(0, m), losses, stream());
  kernels::fill(t.slice(m, 1), static_cast<double>(local_tokens), stream());
  kernels::fill(t.slice(m + 1, 1), normaliser, stream());
  kernels::fill(t.slice(m + 2, 1), normaliser * normaliser, stream());
  module_->world()->all_reduce(t, ReduceOp::sum, stream());
  if (loss_sums_host_.numel() != m + 3) {
    // Zeros in a dry run, whose copies are dropped; pinned on CUDA, so the copy down is asynchronous.
    loss_sums_host_ =
        pinned_ ? Tensor::empty({m + 3}, DType::f64, Device::cpu(), pinned_, Stream::cpu())
                : Tensor::zeros({m + 3}, DType::f64);
  }
  loss_sums_host_.copy_async_(t, stream());
  if (pinned_)
    loss_sums_host_.storage().record_use(stream());  // a block freed early waits for the copy
  if (id_flag.numel() > 0) {
    // Every rank decides on every rank's flag (Note [Device id checks]).
    Communicator& world = *module_->world();
    const std::int64_t words = id_flag.numel() * world.size();
    Tensor flags = id_flag;
    if (world.size() > 1) {
      flags = Tensor::empty({words}, id_flag.dtype(), config_.zero.device, module_->allocator(),
                            stream());
      world.all_gather_into_tensor(flags, id_flag, stream());
    }
    if (id_flag_host_.numel() != words)
      id_flag_host_ =
          Tensor::empty({words}, id_flag.dtype(), Device::cpu(), pinned_, Stream::cpu());
    id_flag_host_.copy_async_(flags, stream());
    id_flag_host_.storage().record_use(stream());
  }
  copied.record(stream());
}

StepStats TrainingEngine::step(const std::vector<Batch>& micro_batches, double lr,
                               ConsistencyCheck check) {
  ZRT_CHECK_ARG(!micro_batches.empty(), "a training step needs at least one micro-batch");
  // The loss's scale is fixed in each micro-batch's forward (Note
  // [Cross-entropy normaliser]): a wrong one trains on a scaled loss, silently.
  for (std::size_t m = 0; m < micro_batches.size(); ++m) {
    const double n = micro_batches[m].normaliser;
    ZRT_CHECK_ARG(std::isfinite(n) && n > 0, "micro-batch ", m, "'s Batch::normaliser is ", n,
                  n == 0 ? " (not set)" : "",
                  ": set it to the number of targets in the global batch (every micro-batch of "
                  "every rank) for the mean loss, as make_micro_batch does");
    ZRT_CHECK_ARG(n == micro_batches[0].normaliser, "micro-batch ", m, "'s Batch::normaliser ", n,
                  " differs from micro-batch 0's ", micro_batches[0].normaliser,
                  ": each is the number of targets in the whole global batch, the same for "
                  "every micro-batch of a step");
  }
  for (Tensor& kept : kept_inputs_) kept = Tensor();  // a step that threw may have left some
  const double scale = module_->loss_scale();
  // On the host: the loss layer reads it there, with no device read per micro-batch.
  const Tensor dloss = Tensor::from_doubles({scale}, DType::f32);
  // Note [One host wait per step]: on CUDA the ids are checked on the device.
  const Device device = config_.zero.device;
  const Tensor id_flag =
      pinned_ ? kernels::new_id_flag(device, module_->allocator(), stream()) : Tensor();
  model_->set_id_check(id_flag);
  struct ClearIdCheck {
    Model& model;
    ~ClearIdCheck() { model.set_id_check(Tensor()); }
  } clear_id_check{*model_};
  Tensor losses;  // each micro-batch's, on the device: read once, after the last
  std::int64_t local_tokens = 0;
  // Every micro-batch on the device first: a copy from host memory waits
  // for its stream, which here holds no work of this step yet.
  std::vector<Batch> homed;
  for (const Batch& b : micro_batches) {
    homed.push_back(home(b));
    homed.back().dloss =
        dloss.item(0);  // the loss stage's gradient in its forward (Note [Fused classifier])
  }
  for (std::size_t m = 0; m < homed.size(); ++m) {
    const Batch& batch = homed[m];
    const Tensor loss = forward(batch);
    if (m == 0)
      losses = Tensor::empty({static_cast<std::int64_t>(homed.size())}, loss.dtype(), device,
                             module_->allocator(), stream());
    losses.slice(static_cast<std::int64_t>(m), 1).copy_(loss, stream());
    local_tokens += batch.targets.numel();
    backward(batch, dloss, m + 1 == homed.size());
  }
  StepStats stats;
  Event losses_copied(device);
  {
    // The compute stream waits for the gradient reductions first: the
    // rank's collectives run in one order (Note [Unshard on the communication stream]).
    auto trace = traced("gradient reductions", {}, "wait");
    module_->wait_for_reduced_grads();
  }
  {
    auto trace = traced("loss all-reduce", {}, "issue");
    queue_loss_sums(losses, local_tokens, homed.front().normaliser, id_flag, losses_copied);
  }
  // The step's losses and id flag, on the host once `losses_copied` has
  // completed: read before anything is updated, and a bad id ends the step.
  bool losses_read = false, losses_refused = false;
  auto read_losses = [&] {
    if (losses_read) return;
    losses_read = true;
    module_->wait(losses_copied, "reading the step's losses");
    const std::int64_t m = loss_sums_host_.numel() - 3;
    for (std::int64_t i = 0; i < m; ++i) stats.loss += loss_sums_host_.item(i);
    stats.tokens = static_cast<std::int64_t>(loss_sums_host_.item(m));
    // Refused on every rank alike, before anything is updated.
    try {
      if (id_flag.numel() > 0) model_->throw_if_bad_ids(id_flag_host_);
      const double ranks = module_->world()->size(), sum = loss_sums_host_.item(m + 1),
                   squares = loss_sums_host_.item(m + 2);
      ZRT_CHECK_ARG(std::abs(ranks * squares - sum * sum) <= 1e-12 * ranks * squares,
                    "the ranks passed different Batch::normaliser values (this rank's is ",
                    homed.front().normaliser, ", their mean ", sum / ranks,
                    "): each is the number of targets in the whole global batch, the same on "
                    "every rank");
    } catch (...) {
      losses_refused = true;
      throw;
    }
  };
  optim::StepResult r;
  if (check != ConsistencyCheck::off) {
    auto trace = traced("consistency check");
    stats.inconsistencies = optim::check_consistency(*module_);
    if (check == ConsistencyCheck::stop && !stats.inconsistencies.empty()) {
      stats.update_withheld = true;  // no update from data the ranks disagree on
      module_->discard_gradients();  // so the step can be trained again once repaired
      read_losses();
      return stats;
    }
  }
  {
    auto trace = traced("optimizer step");  // its statistics' read is the step's one host wait
    PhaseTimer::Scope phase(phase_timer(), Phase::optimizer, stream());
    try {
      r = module_->step(lr, read_losses, first_units_);
    } catch (const optim::TooManySkippedStepsWith<optim::StepResult>& e) {
      read_losses();  // read before the skip was decided: no wait
      stats.grad_norm = e.found.grad_norm;
      stats.skipped = true;
      stats.loss_scale = scale;
      throw optim::TooManySkippedStepsWith<StepStats>(e, std::move(stats));
    } catch (...) {
      // Refused by what the losses' read found (bad ids, unlike normalisers),
      // on every rank alike, before any update: the step's gradients go, so
      // that the next step starts clean.
      if (losses_refused) module_->discard_gradients();
      throw;
    }
  }
  read_losses();
  if (config_.zero.tracer) {
    const MemoryStats m = module_->memory_stats();
    config_.zero.tracer->counter("memory", {{"allocated", static_cast<double>(m.allocated)},
                                            {"reserved", static_cast<double>(m.reserved)}});
  }
  stats.grad_norm = r.grad_norm;
  stats.skipped = r.skipped;
  stats.loss_scale = scale;
  return stats;
}

std::map<std::string, Tensor> TrainingEngine::full_params() { return module_->full_params(); }

}  // namespace zrt::model_zoo
