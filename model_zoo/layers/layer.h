// What every model-zoo layer shares: parameters as engine-owned views, the
// gradient write mode, and allocation of activations.
//
// Note [Layers own no parameters]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A layer holds Tensor handles to its parameters and their gradients, which
// the training engine owns: they are views into flat parameters whose
// storage the engine frees and re-allocates in place (ZeRO-3), so the handles
// stay valid while the memory comes and goes. A layer never allocates a
// parameter; it allocates only activations (from the allocator of its input)
// and caches in forward what its backward needs, releasing it in backward.
#pragma once

#include "zrt/runtime/tensor.h"

namespace zrt::model_zoo {

// A parameter and its gradient: views owned by the training engine.
struct Param {
  Tensor value;
  Tensor grad;
};

// Whether backward writes the parameter gradients (=) or adds to them (+=),
// e.g. for the later micro-batches of gradient accumulation.
enum class GradMode { overwrite, accumulate };

// An uninitialised tensor on `like`'s device, from `like`'s allocator.
Tensor new_activation(const Tensor& like, const Shape& shape, DType dtype, Stream stream);

// `shape` with its last dim replaced by `last`.
Shape with_last_dim(Shape shape, std::int64_t last);

// Note [A layer's input against its parameters]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// An input (or output gradient) whose dtype or device differs from the
// layer's parameters is the caller's mistake, never the parameter's: the
// layer checks it before any kernel, whose operand check could only say that
// the parameter differs from the (unnamed) input, and names the parameter,
// the input and the cast or copy that mends it:
//   Linear fc1.weight: input [64, 20] is f32 but the layer's parameters are
//   bf16; cast the input to bf16
// InvalidArgument; `what` is "input" or "output gradient".
void check_input(const char* layer, const Tensor& param, const Tensor& x, const char* what);

// Throws InvalidState unless a forward left `cached` for the backward.
void check_forward_ran(const char* layer, bool cached);

}  // namespace zrt::model_zoo
