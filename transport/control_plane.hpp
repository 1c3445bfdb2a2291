// The control plane of a multi-process job: who is in it, whether they are alive, and the
// few small collectives the processes need besides the data plane (the plan, the step's
// loss, the trained parameters at the end).
//
// Process 0 is the coordinator: it listens on MASTER_PORT, authenticates every node with the
// job secret (transport/auth.hpp), checks its hello (generation, world size, rank), and once
// all have joined sends everyone the roster (each process's host, data port, pid and the cores
// it offers). Then
// every process and the coordinator exchange heartbeats (default every 1 s); a connection
// that closes without a goodbye (the process died: SIGKILL is seen at once) or stays silent
// past the heartbeat timeout (default 5 s: a stopped or hung process) is a lost node. The
// coordinator then tells the others to abort, and every process's on_lost callback runs
// once with a report naming the node, its pid and address, the step and the reason.
//
// With keep_going, a lost node (not the coordinator) does not end the job: the coordinator
// fences it out (tells it so if it can still hear, and never reads from it again), raises the
// membership epoch and tells the others which processes remain; on_lost runs on every
// process still in the job, a collective waiting on the lost node (or across the change)
// fails at once with errc::closed, and later collectives run among the processes that remain
// (their keys carry the epoch, so a message from before the change is never taken for one
// after it). A node that learns it was fenced reports it as its loss and must leave.
//
// With succession as well (control_options::succession), losing the coordinator does not end
// a job of 3 or more processes: the lowest-numbered live node takes over once a strict
// majority of the last membership has reached it on its standby port (every node offers one
// in its hello), the others follow it, and the job goes on in a new epoch without the lost
// coordinator (leader() names the coordinator now; collectives run through it). Without a
// majority (two lost at once of three, a partition's smaller side) the job ends, saying so.
// A coordinator cut off from more than half of its processes at once ends instead of leading a
// minority, so a partition never yields two coordinators (control_succession.cpp).
//
// A node may also leave in good order (the coordinator's depart(): a new epoch without it, no
// loss; membership::departed lists such processes).
//
// With admit_replacements as well, the coordinator keeps listening while the job runs: a node
// that joins later (replacement) is admitted only into a lost process's place, learns the
// membership it joins with its roster, and the others learn it joined (a new epoch, in which
// every collective counts it; membership::replaced lists such processes).
//
// A job may also grow (admit_joins): its `world` is then the most processes it may have, of
// which the first `initial` form it; the other slots stay empty. A process that joins the
// running job (its hello says world 0: it takes whatever size the job has) is authenticated
// and held until the runtime admits it at a step boundary (admit_joiners: every process held
// then, up to the empty slots, in one new epoch; membership::joined lists them). One beyond
// the empty slots waits as a spare: it is admitted once a slot frees (a process lost or gone)
// or told, when the job ends, that it was not needed.
//
//   control_options o;
//   o.world = 2;  o.process = 0;  o.master_port = 29500;   // a node: its rank, or -1 (join order)
//   auto data_listener = tcp_listener::open(o.master_host, 0);   // this process's data port
//   if (!data_listener) return data_listener.error();
//   result<std::unique_ptr<control_plane>> cp = make_error(errc::closed, "not joined");
//   if (o.process == 0) {
//     auto control_listener = tcp_listener::open(o.master_host, o.master_port);
//     if (!control_listener) return control_listener.error();
//     cp = control_plane::coordinate(o, std::move(*control_listener), data_listener->port());
//   } else {
//     cp = control_plane::join(o, data_listener->port());
//   }
//   if (!cp) return cp.error();
//   std::shared_ptr<fabric> data_plane;                     // tcp_fabric::connect(*data_listener, ...)
//   (*cp)->on_lost([&](const lost_node& n) { if (data_plane) data_plane->close(n.describe()); });
//   auto total = (*cp)->sum(/*key=*/16, {/*local loss=*/0.25});   // on every process
//   if (auto st = (*cp)->finish(10s); !st) return st;      // orderly goodbye
//
// The parts, one file each: the message codec (control_codec.hpp), the rendezvous
// (control_rendezvous.cpp), liveness (control_liveness.cpp), the small collectives
// (control_collectives.cpp), succession (control_succession.cpp); control_plane.cpp holds what
// they share.
//
// Why not CAF's middleman: its BASP handshake deserializes messages from any peer that can
// reach the port before the application sees it, so it cannot authenticate first; and its
// serializer corrupts floats (../shared/STACK.md §3a). This plane reads fixed-size
// handshakes and bounded wire frames only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "graph/tensor.hpp"
#include "transport/socket.hpp"

namespace cohort::transport {

struct control_options {
  int world = 1;    // processes in the job
  int process = 0;  // 0: the coordinator; -1: a node numbered in join order
  std::string master_host = "127.0.0.1";
  int master_port = 29500;
  std::string secret;  // the job secret ("" on loopback-only jobs)
  std::uint64_t generation = 1;
  milliseconds heartbeat{1000}, heartbeat_timeout{5000};
  milliseconds join_timeout{60000};  // the coordinator waiting for every node; a node for the roster
  milliseconds auth_timeout{5000};   // one peer's handshake
  int cores = 1;                     // what this process offers: its compute cores
  bool keep_going = false;           // a lost node leaves the job running with the others
  /// The coordinator, with keep_going: after the start it keeps listening, and a node that
  /// joins then takes a lost process's place (a replacement).
  bool admit_replacements = false;
  /// A node: it joins a running job in a lost process's place (it learns the job's membership
  /// with its roster).
  bool replacement = false;
  /// The coordinator: the processes that form the job at the start (0: world); the slots
  /// from `initial` on are empty until processes join the running job.
  int initial = 0;
  /// The coordinator, with keep_going: a process that joins the running job (hello world 0)
  /// is held until admit_joiners. A node joining a running job sets world 0.
  bool admit_joins = false;
  /// With keep_going: the coordinator is not a single point of failure. Every node offers a
  /// standby port (on `standby_host`) in its hello; when the coordinator is lost and its last
  /// membership had at least 3 processes, the lowest-numbered live node takes over once a
  /// strict majority of that membership (the lost coordinator counted) reaches it there — so a
  /// partition never yields two coordinators — and the others follow it (control_succession.cpp).
  /// A coordinator that loses touch with more than half of its processes at once (silence
  /// within one heartbeat timeout: a partition; a closed connection is an ended process) ends
  /// instead of leading a minority. The new coordinator admits replacements and joining processes
  /// at its standby port (admit_replacements, admit_joins); a process that waited to join at the
  /// lost coordinator asks again at the standby ports it was told (kind::standby), in succession
  /// order, and waits at the new coordinator.
  bool succession = false;
  std::string standby_host = "127.0.0.1";
  /// How long a succession may take from the loss: the others must notice it too (at most a
  /// heartbeat timeout after the last message heard), then reach the successor.
  milliseconds succession_timeout{0};  // 0: twice the heartbeat timeout, plus a second
  /// A process joining the running job again (its first join was dropped): the job's other
  /// processes' standby ports (host, port) in succession order, asked as a waiting process asks
  /// them when the coordinator at master_host:master_port does not answer within a second.
  std::vector<std::pair<std::string, int>> standbys;
};

/// The message a process waiting to join (a spare) gets when the job ends without it.
inline constexpr const char* not_needed = "the job ended before this process was needed";
/// A node gathering its followers after the coordinator's loss, to a process that asks it to
/// join: it does not lead yet (the process asks again shortly).
inline constexpr const char* not_leading = "this process does not lead the job (yet)";

/// Who is in the job after `epoch` membership changes.
struct membership {
  std::uint64_t epoch = 0;
  std::vector<bool> live;     // by process
  std::vector<int> lost;      // every process lost so far, in order
  std::vector<int> replaced;  // every lost process whose place a replacement took, in order
  std::vector<int> departed;  // every process that left in good order (depart), in order
  std::vector<int> joined;    // every process admitted into the running job (admit_joiners), in order
  int leader = 0;             // the coordinator: process 0, or the process that took over from it
};

/// How this process came into the job.
enum class arrival { start, replacement, join };

struct node_entry {
  int process = 0;
  std::string host;
  int data_port = 0;
  std::int64_t pid = 0;
  int cores = 1;         // offered in the hello
  int standby_port = 0;  // where it would take over as the coordinator (0: it would not)
};

struct lost_node {
  int process = -1;
  std::string address;  // host:port of its control connection
  std::int64_t pid = 0;
  std::int64_t step = -1;  // the step in flight when it was lost
  std::string reason;
  double silent_s = 0;       // since the last message heard from it
  bool coordinator = false;  // it was the job's coordinator then
  std::uint64_t epoch = 0;   // keep_going: the membership epoch the job went on in without it
  /// "lost node 1 (pid 4242 at 127.0.0.1:39120) at step 7: connection closed without a goodbye
  /// (the process died or was killed); last heard 0.02 s before"
  std::string describe() const;
};

class control_plane {
 public:
  /// Process 0: waits on `listener` for world-1 nodes, then sends the roster. `data_port`:
  /// this process's data listener.
  static result<std::unique_ptr<control_plane>> coordinate(const control_options& o, tcp_listener listener,
                                                           int data_port);
  /// Any other process: joins the coordinator at master_host:master_port.
  static result<std::unique_ptr<control_plane>> join(const control_options& o, int data_port);
  ~control_plane();

  int process() const { return process_; }
  /// The job's coordinator now: process 0, or the node that took over from a lost one
  /// (control_options::succession).
  int leader() const { return leader_.load(); }
  bool is_leader() const { return leader_.load() == process_; }
  /// The job's slots: the most processes it may have (those that formed it, when it cannot grow).
  int world() const { return o_.world; }
  /// At the start, on a replacement, or joining the running job.
  arrival arrived_as() const { return arrived_; }
  /// Every process's entry (a replacement's once it joined; a lost one's stays as it was).
  std::vector<node_entry> roster() const;
  /// The other live processes' standby ports (host, port), in succession order: where a
  /// process that waits to join asks should its coordinator be lost.
  std::vector<std::pair<std::string, int>> standby_order() const;

  /// Collectives: every process calls them in the same order with the same key.
  /// The coordinator's text, on every process (at most 1 MiB).
  /// `epoch` (keep_going): the membership the caller acts in; a collective of another one fails
  /// at once with errc::closed (a process that has not yet seen a change must not wait on it).
  result<std::string> broadcast_text(std::uint64_t key, const std::string& text,
                                     std::optional<std::uint64_t> epoch = std::nullopt);
  /// Every process's line of text (no newlines, at most 64 KiB), by process, on every process.
  result<std::vector<std::string>> all_gather_text(std::uint64_t key, const std::string& line,
                                                   std::optional<std::uint64_t> epoch = std::nullopt);
  /// The element-wise sum over processes, on every process (exact in double).
  result<std::vector<double>> sum(std::uint64_t key, const std::vector<double>& values,
                                  std::optional<std::uint64_t> epoch = std::nullopt);
  /// Tensors by index: each process gives the ones it holds; the coordinator gets all
  /// `total` (owner[i] = the process that must send index i), the others an empty vector.
  result<std::vector<tensor>> gather(std::uint64_t key, const std::vector<std::pair<int, tensor>>& mine,
                                     const std::vector<int>& owner);

  /// The step in flight, for the loss report.
  void set_step(std::int64_t step) { step_ = step; }
  /// Called once, from the monitor thread, when a node (or the coordinator) is lost.
  void on_lost(std::function<void(const lost_node&)> fn);
  std::optional<lost_node> lost() const;
  /// The report of the latest node the job went on without (keep_going), if any.
  std::optional<lost_node> last_loss() const;
  /// Every node the job went on without in a membership after `epoch`, oldest first (two
  /// processes may be lost in one change the runtime sees).
  std::vector<lost_node> losses_after(std::uint64_t epoch) const;
  /// Waits up to `timeout` for a loss to be known (after a data-plane failure, to report it).
  std::optional<lost_node> wait_lost(milliseconds timeout) const;
  /// The job's membership now.
  membership members() const;
  /// Waits up to `timeout` for the membership to move past `epoch` (keep_going). Errors: the
  /// job ended (the coordinator lost, this process fenced: errc::closed), nothing changed in
  /// time (errc::timeout).
  result<membership> wait_membership(std::uint64_t epoch, milliseconds timeout) const;
  /// The coordinator, with keep_going: node `p` leaves the job in good order (it asked to, and
  /// its state has moved to the others): a new epoch without it, the others told (departed),
  /// no loss reported; its goodbye is answered at once. Errors: not the coordinator, `p` not a
  /// live node, the job ended.
  status depart(int p);
  /// The coordinator (admit_joins): how many processes wait to join that the job has empty
  /// slots for (those gone while waiting are dropped first); the others are spares.
  int joiners_waiting();
  /// The coordinator: admits up to `count` waiting processes into empty slots, all in one new
  /// membership (a new epoch even when none is left to admit, so every node waiting for the
  /// change sees one), and returns it. Errors: not the coordinator, the job ended, the monitor
  /// did not install them within `timeout`. With `known_live` (the processes the caller counts
  /// live): when one of them is lost by the time the monitor would admit (a loss at the step
  /// boundary), nobody is admitted and no epoch added — the loss is the change every node sees —
  /// and the membership returned is the current one (its `joined` unchanged); the waiting
  /// processes go on waiting.
  result<membership> admit_joiners(int count, milliseconds timeout,
                                   std::optional<std::vector<bool>> known_live = std::nullopt);
  /// An orderly end: goodbyes exchanged, so closing connections are not losses.
  status finish(milliseconds timeout);
  /// Payload bytes this process has sent on the control plane (collectives, heartbeats).
  std::uint64_t bytes_sent() const { return sent_bytes_.load(std::memory_order_relaxed); }

 private:
  struct peer;
  struct message {
    std::uint32_t source = 0;  // a piece's index; otherwise the sending process
    tensor body;
  };
  control_plane(const control_options& o, int process);
  void monitor();
  void handle_frame(int p, std::uint64_t tag, message m);
  /// `silent`: found by its silence (no heartbeat), which a partition looks like too.
  void declare_lost(int p, const std::string& reason, bool silent = false);
  /// After a membership change's on_lost callback (taken with telling_ raised under the lock):
  /// lowers telling_ and wakes the waiters.
  void told_lost();
  /// Keys carry the membership epoch (bits 48-55).
  static std::uint64_t epoch_key(std::uint64_t key, std::uint64_t epoch);
  /// The epoch a collective runs in: `wanted`, or the current one. Errors: `wanted` is past.
  result<std::uint64_t> call_epoch(std::optional<std::uint64_t> wanted) const;
  bool is_live(int p) const;  // mutex_ held
  /// broadcast_text in epoch `e`, already checked (the second half of all_gather_text).
  result<std::string> broadcast_in(std::uint64_t key, const std::string& text, std::uint64_t e);
  status send(int p, std::uint64_t tag, const tensor& body);
  /// The next message of `tag` from `p`; fails at once when the membership leaves `epoch`.
  result<message> take(int p, std::uint64_t tag, milliseconds timeout, std::uint64_t epoch);
  void start_monitor();
  /// The coordinator's admission of late nodes (admit_replacements, admit_joins): accepts,
  /// authenticates and checks a late node on its own thread; the monitor installs a
  /// replacement at once and joiners when the runtime asks (install_admissions).
  void admit_loop();
  void install_admissions();
  struct admission;
  /// On the monitor thread: `batch` (their slots chosen) becomes live in one new epoch.
  void install_batch(std::vector<admission> batch, bool replacements);
  /// Tells every process still waiting to join that the job ended without it.
  void dismiss_waiting();
  /// The coordinator, to a process waiting to join: the other live processes' standby ports in
  /// succession order, where it asks again should this coordinator be lost (false: the write
  /// failed, the process is gone).
  bool tell_standbys(tcp_socket& s);
  /// On the monitor thread, a node that lost the coordinator `lost` (control_succession.cpp):
  /// takes over, or follows the node that does; false when the job cannot go on (then the
  /// caller ends it with `n`, whose reason says why).
  bool succeed(lost_node& n);
  bool take_over(lost_node& n, const std::vector<bool>& live, std::uint64_t epoch, int needed);
  bool follow(lost_node& n, int successor, std::uint64_t epoch);
  /// On the monitor thread (the only one that reads listener_ while the job runs), once this
  /// process took over: its standby port becomes the job's listener and the admitter starts.
  void admit_at_standby();
  /// The coordinator (succession), a node gone silent: whether losing it leaves the
  /// coordinator touching fewer than half of the processes it had before this burst of silent
  /// losses (mutex_ held).
  bool lost_the_majority_locked();

  control_options o_;
  int process_ = 0;
  std::vector<node_entry> roster_;
  std::vector<std::unique_ptr<peer>> peers_;  // by process; the coordinator has all, a node only 0
  std::thread monitor_;
  std::atomic<bool> stopping_{false};
  std::atomic<std::int64_t> step_{-1};
  std::atomic<std::uint64_t> sent_bytes_{0};
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::map<std::pair<int, std::uint64_t>, std::deque<message>> inbox_;
  std::optional<lost_node> lost_;  // the loss that ends the job (keep_going: the coordinator's, or being fenced)
  std::uint64_t epoch_ = 0;
  // membership changes whose on_lost callback has not run yet: wait_membership returns only
  // once they have (told_lost)
  int telling_ = 0;
  std::vector<bool> live_;
  std::vector<int> lost_processes_;
  std::vector<lost_node> losses_;  // keep_going: the nodes the job went on without
  std::vector<int> replaced_;      // lost processes whose place a replacement took, in order
  std::vector<int> departed_;      // processes that left in good order, in order
  std::string last_change_;        // the latest membership change: "process 3 lost", "process 3 replaced"
  std::vector<int> joined_;        // processes admitted into the running job, in order
  arrival arrived_ = arrival::start;
  struct admission {
    int process = 0;
    node_entry entry;
    tcp_socket socket;
  };
  std::vector<admission> admitted_;  // replacements checked by the admitter, not installed yet (mutex_)
  std::vector<admission> waiting_;   // processes waiting to join (mutex_): no slot yet
  int release_ = -1;                 // admit_joiners: how many of them the monitor installs next (mutex_)
  std::optional<std::vector<bool>> release_unless_lost_;  // ... unless one of these is lost (mutex_)
  std::optional<tcp_listener> listener_;
  std::optional<tcp_listener> standby_;  // a node's, with succession: where it would take over
  std::atomic<bool> admitting_{false};   // listener_ is set and the admitter runs
  std::atomic<int> leader_{0};
  // the coordinator's burst of losses (succession): when the last one came, and how many
  // processes were live before the first (mutex_)
  std::chrono::steady_clock::time_point burst_at_{};
  int burst_base_ = 0;
  std::thread admitter_;
  std::function<void(const lost_node&)> on_lost_;
};

}  // namespace cohort::transport
