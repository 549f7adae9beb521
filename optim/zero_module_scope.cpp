// ZeroModule::Scope: a unit's forward or backward scope, from the gathers
// that open it to the reshard and gradient reduction that close it (Note
// [ZeroModule scopes], Note [A scope outlives no module]).
#include <exception>
#include <string>

#include "zrt/optim/zero_module.h"

namespace zrt::optim {

ZeroModule::Scope::Scope(ZeroModule* module, std::size_t unit, bool backward, bool sync,
                         Stream stream)
    : module_alive_(module->alive_),
      module_(module),
      unit_(unit),
      handle_(module->handles_[unit].get()),
      backward_(backward),
      sync_(sync),
      stream_(stream),
      what_(std::string("the ") + (backward ? "backward" : "forward") + " scope of unit '" +
            handle_->name() + "'"),
      uncaught_at_open_(std::uncaught_exceptions()) {
  ZRT_CHECK_ARG(stream_.is_cpu() || stream_.device() == module_->options().device,
                "ZeroModule: the ", backward_ ? "backward" : "forward", " scope of unit '",
                handle_->name(), "' was given a stream on ", stream_.device().str(),
                " but the module runs on ", module_->options().device.str());
  ZRT_CHECK_ARG(!(stream_.cpu_queue() && module_->options().device.is_cuda()), "ZeroModule: the ",
                backward_ ? "backward" : "forward", " scope of unit '", handle_->name(),
                "' was given a CPU stream of its own, which cannot wait for the module's "
                "CUDA streams; pass a CUDA stream or none");
  // Names the gathers in a mismatch with another rank's (Note [Collective contract]).
  FlightRecorder::Caller caller(
      *module_->world_->flight_recorder(),
      std::string(backward_ ? "backward('" : "forward('") + handle_->name() + "')");
  // Checked before the owners are touched: a second scope of an open unit
  // must not undo the first one's tie gradients below.
  ZRT_CHECK_CALL(
      handle_->state() == HandleState::idle, "ZeroModule: a ", backward_ ? "backward" : "forward",
      " scope of unit '", handle_->name(), "' opened while a scope of it is open",
      module_->tie_users(unit_).empty() ? std::string()
                                        : " (its own, or one of a unit that uses its parameters: " +
                                              module_->tie_users(unit_) + ")");
  // A second sync would replace the gradient the first one reduced.
  // After a backward ended by an exception (Note [A failed backward skips
  // the step]) the retry is the mistake's likely cause.
  ZRT_CHECK_CALL(!backward_ || !module_->synced_[unit_], "ZeroModule: unit '", handle_->name(),
                 "' already synced its gradient this step; a second backward(unit, true) would "
                 "replace it: ",
                 module_->failed_[unit_]
                     ? "its backward this step ended by an exception, so step() would skip "
                       "this step; to retry, call discard_gradients() (it drops all of this "
                       "step's gradients) and run the step's micro-batches again"
                     : "pass sync=false to every backward of the unit in a step but the last "
                       "(after an optimizer().step() of your own, call discard_gradients() "
                       "first)");
  try {
    module_->open_ties(unit_, backward_, &opened_owners_, &open_owners_);
    if (backward_)
      handle_->pre_backward();
    else
      handle_->pre_forward();
    serve_caller();
  } catch (...) {
    // Undo what opened; the first failure is the one to report. A scope
    // whose gather was issued reshards (a failed wait here means a broken
    // group, which the run does not survive anyway); a backward one goes
    // back to idle, never run.
    const HandleState opened = handle_->state();
    if (opened == HandleState::forward || opened == HandleState::backward_pre) {
      try {
        if (opened == HandleState::forward)
          handle_->post_forward();
        else
          handle_->cancel_backward();
      } catch (const std::exception& e) {
        report_in_destructor("ZeroModule scope", e);
      }
    }
    for (Tie& t : module_->ties_)
      if (t.param.user.index() == unit_ && !t.grad.is_freed()) free_storage(t.grad);
    for (const auto& [o, hold] : open_owners_) module_->leave_owner(unit_, o, hold);
    for (std::size_t o : opened_owners_) {
      try {
        module_->handles_[o]->post_forward();
      } catch (const std::exception& e) {
        report_in_destructor("ZeroModule scope", e);
      }
    }
    throw;
  }
}

ZeroModule::Scope::Scope(Scope&& o) noexcept
    : module_alive_(std::move(o.module_alive_)),
      module_(o.module_),
      unit_(o.unit_),
      handle_(o.handle_),
      backward_(o.backward_),
      sync_(o.sync_),
      stream_(o.stream_),
      opened_owners_(std::move(o.opened_owners_)),
      open_owners_(std::move(o.open_owners_)),
      what_(std::move(o.what_)),
      uncaught_at_open_(o.uncaught_at_open_) {
  o.handle_ = nullptr;
}

void ZeroModule::Scope::serve_caller() const {
  const Stream compute = module_->stream();
  if (stream_ == compute) return;
  Event ready(module_->options().device);
  ready.record(compute);
  if (!stream_.cpu_queue() && compute.is_cpu())  // the calling thread: the host waits
    module_->wait(ready, "opening a scope for the calling thread");
  else
    ready.wait(stream_);
}

ZeroModule::Scope::~Scope() {
  if (!handle_) return;
  // Ended by an exception in the caller's backward: its gradient is partial
  // (Note [A failed backward skips the step]).
  if (backward_ && std::uncaught_exceptions() > uncaught_at_open_ && !module_alive_.expired())
    module_->failed_[unit_] = true;
  try {
    close();
  } catch (const std::exception& e) {
    report_in_destructor("ZeroModule scope", e);
  }
}

void ZeroModule::Scope::close() {
  if (!handle_) return;
  FlatParamHandle* h = handle_;
  handle_ = nullptr;  // closed, whatever happens below
  ZRT_CHECK_CALL(!module_alive_.expired(), "ZeroModule: ", what_,
                 " was closed after its module was destroyed; close every scope before "
                 "destroying the module");
  FlightRecorder::Caller caller(
      *module_->world_->flight_recorder(),
      std::string(backward_ ? "the end of backward('" : "the end of forward('") + h->name() + "')");
  // Every part runs; the first failure is rethrown at the end.
  std::exception_ptr failure;
  auto attempt = [&](auto&& part) {
    try {
      part();
    } catch (...) {
      if (!failure) failure = std::current_exception();
    }
  };
  // A part whose failure leaves this unit's gradient incomplete marks the
  // unit: Note [A failed backward skips the step].
  auto attempt_or_mark_failed = [&](auto&& part) {
    attempt([&] {
      try {
        part();
      } catch (...) {
        module_->failed_[unit_] = true;
        throw;
      }
    });
  };
  // The module's reshard and reduction come after the caller's work.
  if (stream_ != module_->stream())
    attempt([&] {
      Event done(module_->options().device);
      done.record(stream_);
      done.wait(module_->stream());
    });
  if (backward_) attempt_or_mark_failed([&] { module_->add_tie_grads(unit_); });
  for (const auto& [o, hold] : open_owners_) module_->leave_owner(unit_, o, hold);
  open_owners_.clear();
  // The holds this scope ends: a user's scope opened inside it and using
  // their parameters finds no memory after (Note [Parameters tied across units]).
  for (std::size_t o : opened_owners_) {
    attempt([&] { module_->end_hold(o, what_); });
    attempt([&] { module_->handles_[o]->post_forward(); });
  }
  opened_owners_.clear();
  attempt([&] { module_->end_hold(unit_, what_); });
  if (!backward_) {
    attempt([&] { h->post_forward(); });
  } else {
    attempt_or_mark_failed([&] {
      h->post_backward(sync_);
      if (sync_) {
        module_->synced_since_step_ = true;
        module_->synced_[unit_] = true;
        module_->unsynced_[unit_] = 0;
        module_->tie_grads_[unit_] = 0;
      } else {
        ++module_->unsynced_[unit_];
      }
    });
  }
  if (failure) std::rethrow_exception(failure);
}

Tensor ZeroModule::Scope::param(const std::string& name) const {
  ZRT_CHECK_CALL(handle_ != nullptr, "ZeroModule: parameter '", name, "' of a closed scope");
  ZRT_CHECK_CALL(!module_alive_.expired(), "ZeroModule: parameter '", name, "' of ", what_,
                 ", whose module was destroyed");
  return module_->param_views_at(unit_, name).param;
}

Tensor ZeroModule::Scope::grad(const std::string& name) const {
  ZRT_CHECK_CALL(backward_, "ZeroModule: grad('", name, "') outside a backward scope");
  ZRT_CHECK_CALL(handle_ != nullptr, "ZeroModule: parameter '", name, "' of a closed scope");
  ZRT_CHECK_CALL(!module_alive_.expired(), "ZeroModule: gradient '", name, "' of ", what_,
                 ", whose module was destroyed");
  return module_->param_views_at(unit_, name).grad;
}

}  // namespace zrt::optim
