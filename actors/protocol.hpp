// The runtime's protocol as typed interfaces: what each actor answers, checked by the
// compiler wherever a message is sent (actors/messages.hpp says what the messages mean, and in
// which order they come). Workers are blocking actors on their own threads; their handle is
// typed for the coordinator that drives them.
//
//   // a coordinator's request: the compiler checks it against param_actor_hdl's interface
//   void fetch_piece(caf::event_based_actor* self, param_actor_hdl params, std::int64_t committed) {
//     self->request(params, std::chrono::seconds(10), fetch_atom::value, committed)
//         .then([](tensor& piece) { std::printf("%lld elements\n", static_cast<long long>(piece.numel())); });
//   }
#pragma once

#include <caf/all.hpp>

#include <cstdint>
#include <memory>

#include "actors/atoms.hpp"

namespace cohort {
class tensor;
namespace transport {
class fabric;
}  // namespace transport
namespace actors {

struct micro_batch;
struct data_split;
struct step_outcome;
struct piece_state;
struct piece_gradient;
struct decided_plan;
struct transition_plan;
struct scale_request;
struct scale_answer;
struct compiled_model;
struct run_summary;
struct step_metrics;
struct blocking_call;
class parameter_piece;

/// The fabric a generation's actors share, and the piece a parameter actor lends its worker.
using fabric_ptr = std::shared_ptr<transport::fabric>;
using piece_ptr = std::shared_ptr<parameter_piece>;
using model_ptr = std::shared_ptr<const compiled_model>;

/// One (replica, stage, tp rank): runs a step when asked, takes a new fabric after a failure.
using worker_hdl =
    caf::typed_actor<caf::replies_to<step_atom, std::int64_t, std::int64_t,
                                     std::int64_t>::with<done_atom, std::int64_t, std::int64_t, step_outcome>,
                     caf::replies_to<reset_atom, std::int64_t, fabric_ptr>::with<ok_atom>>;

/// One worker's parameter piece and its optimizer state.
using param_actor_hdl =
    caf::typed_actor<caf::replies_to<attach_atom, tensor>::with<piece_ptr>,
                     caf::replies_to<update_atom, std::int64_t, std::int64_t, piece_gradient>::with<ok_atom>,
                     caf::replies_to<rollback_atom, std::int64_t, std::int64_t>::with<ok_atom>,
                     caf::replies_to<fetch_atom, std::int64_t>::with<tensor>,
                     caf::replies_to<export_atom, std::int64_t>::with<piece_state>>;

/// The step's batch, split by replica; prepares the next step's ahead of time; a new plan
/// cuts the same stream another way (dp, micro-batches, the batch from a step on, prefetch).
using data_actor_hdl =
    caf::typed_actor<caf::replies_to<batch_atom, std::int64_t, int>::with<micro_batch>,
                     caf::reacts_to<prepare_atom, std::int64_t>, caf::reacts_to<configure_atom, data_split>>;

/// Decides a plan change (or whether the job grows for processes waiting to join) and
/// prepares the transition to it; refits the cost model from the
/// steps it is shown and answers the prediction's JSON at the end.
using planner_actor_hdl =
    caf::typed_actor<caf::replies_to<plan_atom, std::size_t, model_ptr>::with<decided_plan>,
                     caf::replies_to<replan_atom, int, int, model_ptr>::with<decided_plan>,
                     caf::replies_to<scale_atom, scale_request, model_ptr>::with<scale_answer>,
                     caf::replies_to<transfer_atom, decided_plan, model_ptr>::with<transition_plan>,
                     caf::reacts_to<observe_atom, step_metrics>, caf::replies_to<refit_atom>::with<std::string>>;

/// Runs blocking work on its own thread.
using control_proxy_hdl = caf::typed_actor<caf::replies_to<call_atom, blocking_call>::with<ok_atom>>;

/// Trains the whole run.
using coordinator_hdl = caf::typed_actor<caf::replies_to<run_atom>::with<run_summary>>;

}  // namespace actors
}  // namespace cohort
