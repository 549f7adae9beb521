// The model interface the training engine drives: parameters grouped into wrap
// units, initial values from a seed, binding to engine-owned parameter views,
// and the forward and backward passes as stages, each of which uses the
// parameters of one unit (so the engine can unshard one unit at a time).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "zrt/model_zoo/layers/layer.h"
#include "zrt/model_zoo/models/model_config.h"
#include "zrt/model_zoo/models/param_init.h"

namespace zrt::model_zoo {

struct ParamDef {
  std::string module_path;  // e.g. "h.3.attn.c_attn" ("" at top level)
  std::string name;         // e.g. "weight"
  Shape shape;              // its own: what init, checkpoints and files hold
  // Zero rows the layers see after its own (Note [Padded rows of a parameter]
  // in optim/flat_param/flat_param_layout.h): their views are padded_shape().
  std::int64_t pad_rows = 0;
  std::string fqn() const;  // "h.3.attn.c_attn.weight"
  Shape padded_shape() const;
};

struct UnitDef {
  std::string name;              // e.g. "h.3", "embed_head", "layers.0"
  std::vector<ParamDef> params;  // module order
  // (second fqn, primary fqn); the primary is this unit's or an earlier
  // unit's (a tie across units: Note [Parameters tied across units]).
  std::vector<std::pair<std::string, std::string>> tied;
};

struct Batch {     // one micro-batch on one rank
  Tensor inputs;   // gpt: [b, T] i32 token ids; mlp: [b, d_in] f32
  Tensor targets;  // gpt: [b, T] i32; mlp: [b] i64
  // Target tokens/rows in the GLOBAL batch (loss = sum / normaliser), the
  // same for every micro-batch of a step; 0, not set, is refused by the
  // engine, which would otherwise train on an unscaled sum.
  double normaliser = 0.0;
  // The dloss the backward will pass (the loss scale): the loss stage's
  // forward writes the logits' gradient for it already (Note [Fused classifier]).
  double dloss = 1.0;
};

// Value/grad views (compute dtype, ParamDef::padded_shape()) of a parameter by its fqn.
using ParamLookup = std::function<Param(const std::string& fqn)>;

class Model {
 public:
  virtual ~Model() = default;
  virtual std::string kind() const = 0;            // "gpt" | "mlp"
  virtual std::vector<UnitDef> units() const = 0;  // wrap units, in order
  // How every primary parameter starts (param_init.h), by name.
  virtual std::map<std::string, ParamInit> param_inits() const = 0;
  // Initial values for every primary parameter (fp32, cpu) from a seed,
  // identical on all ranks and layouts (Note [Counter-based parameter init]).
  std::map<std::string, Tensor> init_params(std::uint64_t seed) const;
  // Binds layers to parameter views; called once (the views stay valid while
  // their storage is freed and re-allocated).
  virtual void bind(const ParamLookup& lookup) = 0;
  // The forward pass as stages; stage s computes with the parameters of unit stage_unit(s).
  virtual int num_stages() const = 0;
  virtual int stage_unit(int s) const = 0;
  // Stage 0 takes the batch inputs (x ignored); the last stage returns the
  // micro-batch loss as a 1-element f32 tensor = Σ per-target losses / batch.normaliser.
  virtual Tensor stage_forward(int s, const Tensor& x, const Batch& batch, Stream stream) = 0;
  // The last stage takes dloss (a 1-element f32 host tensor: read there
  // without a device sync) as dy. Stage 0 returns an empty tensor. Gradients
  // are ACCUMULATED into the bound grad views.
  virtual Tensor stage_backward(int s, const Tensor& dy, Stream stream) = 0;
  // The stages that are repeated blocks (GPT's transformer blocks, an MLP's
  // hidden layers), in order: they read x only (not the batch), so the engine
  // may keep just their input and run them again before their backward
  // (Note [Activation checkpointing]).
  virtual std::vector<int> block_stages() const = 0;
  // Drops what block stage s's forward kept for its backward.
  virtual void release_stage(int s) = 0;

  // The ids (GPT's tokens, the targets) are in [0, id_limit()).
  virtual std::int64_t id_limit() const = 0;
  // Per-step device id checks (Note [Device id checks] in
  // kernels/nn/id_check.h): while `flag` (an id flag on the model's device,
  // e.g. kernels::new_id_flag) is set, the stages' CUDA ops check their ids
  // into it instead of copying them to the host, and a stage's backward uses
  // the flag its forward saw. An empty tensor clears it (host checks). On the
  // CPU the ops still check on the host and throw.
  void set_id_check(Tensor flag);
  // The flag set, or null.
  const Tensor* id_check() const { return id_flag_.numel() ? &id_flag_ : nullptr; }
  // Throws InvalidArgument "token id out of range [0, id_limit())" naming the
  // first bad id and its position when `host_flags` (the flag read back to
  // the host, or every rank's, rank after rank) records one; returns otherwise.
  void throw_if_bad_ids(const Tensor& host_flags) const;

 private:
  Tensor id_flag_;
};

// Builds the model of a validated config (InvalidArgument naming the problem).
std::unique_ptr<Model> make_model(const ModelConfig& config);

// Every parameter of `units` by fqn, in unit and module order (tied names excluded).
std::vector<ParamDef> all_param_defs(const std::vector<UnitDef>& units);

}  // namespace zrt::model_zoo
