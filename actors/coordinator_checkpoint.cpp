// The coordinator's checkpoints: at a step boundary the primary pieces of this process are
// copied (the next step waits only for that), then the checkpoint writer — a control proxy of
// its own, on its own thread — writes them while training goes on. The run's collection waits
// for the writes in flight.
#include "actors/checkpoint_store.hpp"
#include "actors/coordinator_parts.hpp"

namespace cohort::actors::coordination {
namespace {

void write_done(self_ptr self, checkpoint_record rec, const result<checkpoint::written>& w) {
  auto& s = self->state;
  --s.writes_in_flight;
  if (w) {
    rec.path = w->path;
    rec.write_seconds = w->seconds;
    rec.bytes = static_cast<double>(w->bytes);
  } else {
    rec.error = w.error().message;
  }
  s.summary.checkpoints.push_back(rec);
  if (s.options.on_checkpoint) s.options.on_checkpoint(rec);
  if (!w && s.options.checkpoint->stop_on_error)
    return execute(self,
                   s.protocol->on_error(make_error(
                       w.error().code, "checkpoint at step " + std::to_string(rec.step) + ": " + w.error().message)));
  if (s.collection_waits && s.writes_in_flight == 0) {
    s.collection_waits = false;
    finish_collection(self);
  }
}

// Every primary piece of this process copied: hand them to the writer, go on training.
void write(self_ptr self, std::shared_ptr<checkpoint::contents> c, std::chrono::steady_clock::time_point started) {
  auto& s = self->state;
  checkpoint_record rec;
  rec.step = c->step;
  rec.snapshot_seconds = since(started);
  checkpoint::store_settings settings;
  settings.dir = s.options.checkpoint->dir;
  settings.keep = s.options.checkpoint->keep;
  settings.timeout = s.options.timeout;
  settings.cancelled = s.writes_cancelled;
  settings.progress = s.options.checkpoint->write_progress;
  settings.first = s.options.job && s.options.job->leader ? s.options.job->leader() : 0;
  const int process = s.options.job ? s.options.job->process : 0;
  auto out = std::make_shared<result<checkpoint::written>>(make_error(errc::closed, "not written"));
  ++s.writes_in_flight;
  self->request(s.writer, s.options.timeout * 10, call_atom::value,
                blocking_call{[=] { *out = checkpoint::save(settings, *c, process); }})
      .then([=](ok_atom) { write_done(self, rec, *out); },
            [=](caf::error& e) {
              write_done(self, rec, make_error(errc::timeout, "checkpoint writer: " + to_string(e)));
            });
  execute(self, s.protocol->on_snapshot_taken(clock_type::now()));
}

}  // namespace

void cancel_waiting_writes(self_ptr self) {
  auto& s = self->state;
  s.writes_cancelled->store(true);
  s.writes_cancelled = std::make_shared<std::atomic<bool>>(false);
}

void snapshot(self_ptr self, const snapshot_action& a) {
  auto& s = self->state;
  const auto started = std::chrono::steady_clock::now();
  if (s.layouts_of != s.protocol->layout()) {
    auto layouts = piece_layouts(*s.model);
    if (!layouts) return execute(self, s.protocol->on_error(layouts.error()));
    s.layouts = std::move(*layouts);
    s.layouts_of = s.protocol->layout();
  }
  auto c = std::make_shared<checkpoint::contents>();
  c->step = a.step;
  c->plan = s.model->plan;
  c->cuts = s.model->cuts;
  c->layouts = s.layouts;
  c->owner = s.owner;
  c->processes = s.options.job ? s.options.job->processes : 1;
  c->states.resize(s.params.size());
  c->optimizer = s.options.optimizer;
  c->seed = s.options.seed;
  c->next_sample = s.cursor.first_sample(a.step);  // the data cursor: where the next step's samples start
  auto left = std::make_shared<std::size_t>(0);
  for (std::size_t r = 0; r < s.params.size(); ++r) *left += s.params[r] && s.layouts[r].primary ? 1 : 0;
  if (*left == 0) return write(self, c, started);
  for (std::size_t r = 0; r < s.params.size(); ++r) {
    if (!s.params[r] || !s.layouts[r].primary) continue;
    self->request(s.params[r], s.options.timeout, export_atom::value, a.committed)
        .then(
            [=](piece_state& p) {
              c->states[r] = std::move(p);
              if (--*left == 0) write(self, c, started);
            },
            [=](caf::error& e) { execute(self, self->state.protocol->on_error(from_caf(e))); });
  }
}

}  // namespace cohort::actors::coordination
