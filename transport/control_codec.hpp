// The control plane's messages (internal to transport/): which kinds there are, what each
// carries and how it is packed into a wire frame (transport/wire.hpp), and reading or writing
// one whole frame on a control connection with every length bounded before anything is
// allocated. Every body is an i32 tensor (the wire's dtypes): integers as two words each,
// doubles bit for bit, text as a length word and the bytes; a gathered piece is any tensor.
//
//   kind       key       body                                       sent by
//   hello      0         ints: process, pid, data port, world, cores,  a node, first
//                        standby port (0: none)
//   roster     node's p  text: "process host port pid cores standby"   the coordinator, then
//                        lines
//   refuse     0         text: why the node is refused              the coordinator, instead
//   heartbeat  0         empty                                      both, every heartbeat
//   text       the key   text                                       broadcast/all-gather
//   sum_part   the key   doubles                                    a node
//   sum_total  the key   doubles                                    the coordinator
//   piece      the key   a tensor (the frame's source: its index)   a node (gather)
//   bye        0         empty                                      both (finish)
//   abort_job  0         text: the loss                             the coordinator
//   membership 0         text: "EPOCH PROCESS REPORT" (PROCESS lost) the coordinator (keep_going)
//   fenced     0         text: why                                  the coordinator, to the lost
//   joined     0         text: "EPOCH N (P r|j HOST PORT PID CORES)xN" the coordinator: processes
//                        installed in one change (r: a replacement, j: joined the running job)
//   admitted   0         text: membership_text (epoch, live flags, replacements, joins so far)
//                                                                   the coordinator, to every node after its roster
//   follow     0         ints: process, epoch                       a node, to the successor of a
//                                                                   lost coordinator (its standby port)
//   took_over  0         text: succession_text                      the successor, to each node that
//                                                                   followed it: the job goes on
//   standby    0         text: standby_text ("host port" lines)      the coordinator, to a process
//                                                                   waiting to join: where it waits
//                                                                   again if the coordinator is lost
//
//   auto listener = tcp_listener::open("127.0.0.1", 0);
//   if (!listener) return listener.error();
//   auto sock = tcp_socket::connect("127.0.0.1", listener->port(), 5s);
//   auto peer = listener->accept(5s);
//   if (!sock || !peer) return make_error(errc::io_error, "no loopback connection");
//   if (auto st = write_message(*sock, /*generation=*/5, tag_of(kind::text, 7), /*source=*/0, pack_text("plan"), 5s); !st)
//     return st;
//   auto m = read_message(*peer, 5, small_payload, 5s);   // errors name the field
//   if (!m) return m.error();
//   if (is(m->tag, kind::text) && key_of(m->tag) == 7) auto text = text_of(m->body);   // "plan"
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/error.hpp"
#include "graph/tensor.hpp"
#include "transport/control_plane.hpp"
#include "transport/socket.hpp"

namespace cohort::transport::control {

enum class kind : std::uint8_t {
  hello = 1,
  roster = 2,
  heartbeat = 3,
  text = 4,
  sum_part = 5,
  sum_total = 6,
  piece = 7,
  bye = 8,
  abort_job = 9,
  refuse = 10,
  membership = 11,  // the coordinator to the nodes that remain: the job goes on without a lost node
  fenced = 12,      // the coordinator to a node it declared lost: leave, the job went on without you
  joined = 13,      // the coordinator to the nodes: processes took lost or empty slots
  admitted = 14,    // the coordinator to a node, after its roster: the membership it joins
  departed = 15,    // the coordinator to the nodes that remain: a node left the job in good order
  follow = 16,      // a node to the successor of a lost coordinator: it follows, in this epoch
  took_over = 17,   // the successor to its followers: it leads now, without the processes named
  standby = 18      // the coordinator to a process waiting to join: the standby ports, succession order
};

/// The frame tag of a message: (key << 8) | kind.
inline std::uint64_t tag_of(kind k, std::uint64_t key = 0) { return (key << 8) | static_cast<std::uint64_t>(k); }
/// The kind code of a tag (a peer may send any: unknown codes are not a `kind`).
inline std::uint64_t kind_code(std::uint64_t tag) { return tag & 0xff; }
inline bool is(std::uint64_t tag, kind k) { return kind_code(tag) == static_cast<std::uint64_t>(k); }
inline std::uint64_t key_of(std::uint64_t tag) { return tag >> 8; }

/// The payload limit of every message but a gathered piece: 1 MiB.
inline constexpr std::uint64_t small_payload = 1 << 20;

tensor pack_ints(const std::vector<std::int64_t>& v);
/// Pairs of words (a trailing odd word is ignored; a body of another dtype is empty).
std::vector<std::int64_t> ints_of(const tensor& t);
tensor pack_doubles(const std::vector<double>& d);
std::vector<double> doubles_of(const tensor& t);
tensor pack_text(const std::string& s);
/// errc::io_error "control: malformed text message" when the length word is missing or
/// exceeds the bytes that follow.
result<std::string> text_of(const tensor& t);

// As sent: 64-bit integers, range-checked by the coordinator.
struct hello {
  std::int64_t process = 0;  // the number asked for (-1: any)
  std::int64_t pid = 0;
  std::int64_t data_port = 0;
  std::int64_t world = 0;  // the world size the node expects (0: it joins a running job of any size)
  std::int64_t cores = 1;
  std::int64_t standby_port = 0;  // where it would take over as the coordinator (0: it would not)
};
tensor pack_hello(const hello& h);
/// errc::io_error "expected a hello" unless `tag` is a hello's and the body holds six integers.
result<hello> hello_of(std::uint64_t tag, const tensor& body);

/// The most processes (slots) a job may have.
inline constexpr int max_world = 4096;

/// One line per process: "process host data_port pid cores standby_port"; a slot nobody has
/// taken yet (pid 0: a job that processes may join later) is "process - 0 0 0 0".
std::string roster_text(const std::vector<node_entry>& r);
/// The roster of a job of `world` processes, by process (an empty slot: pid 0, no host).
/// Errors (errc::io_error): an entry out of range, repeated, with an implausible host, port,
/// pid or core count; too few entries; process 0 empty.
result<std::vector<node_entry>> parse_roster(const std::string& text, int world);
/// The same, the job's size taken from the roster itself (a process joining a running job
/// does not know it): one line per slot, 2..max_world of them.
result<std::vector<node_entry>> parse_roster(const std::string& text);

/// The membership a node joins with (the coordinator's `admitted` message):
/// "epoch E live F0 .. Fn-1 replaced P.. joined P..". parse_membership validates it for a
/// job of `world` slots (the flags, every process in range, process 0 live); lost and departed
/// are not sent.
std::string membership_text(const membership& m);
result<membership> parse_membership(const std::string& text, int world);

/// Processes installed in one membership change (the coordinator's `joined` message to the
/// nodes already in the job): each a replacement of a lost process or a process joining the
/// running job. "EPOCH COUNT" then per process "P r|j HOST PORT PID CORES STANDBY".
struct joined_entry {
  node_entry node;
  bool replacement = false;
};
std::string joined_text(std::uint64_t epoch, const std::vector<joined_entry>& batch);
result<std::pair<std::uint64_t, std::vector<joined_entry>>> parse_joined(const std::string& text, int world);

/// A succession (the successor's `took_over`): the new epoch, the new coordinator, the
/// processes the job goes on without (the lost coordinator first, then any node that did not
/// follow in time), and the report of the coordinator's loss as the successor saw it.
/// "EPOCH LEADER COUNT P.. REPORT".
struct succession {
  std::uint64_t epoch = 0;
  int leader = 0;
  std::vector<int> lost;
  std::string report;
};
std::string succession_text(const succession& s);
/// Validated for a job of `world` slots: the leader and every lost process in range, distinct,
/// at least one lost, the leader not among them.
result<succession> parse_succession(const std::string& text, int world);

/// Where a process waiting to join the running job asks again when the coordinator it waits at
/// is lost: every other live process's standby port, in succession order (lowest first: the
/// one that takes over, then the one after it). "HOST PORT" per line; at most max_world lines.
struct standby_address {
  std::string host;
  int port = 0;
};
std::string standby_text(const std::vector<standby_address>& order);
/// errc::io_error naming the line: an implausible host, a port outside 1..65535, too many lines.
result<std::vector<standby_address>> parse_standbys(const std::string& text);

struct message {
  std::uint64_t tag = 0;
  std::uint32_t source = 0;  // the sending process; a piece's index
  tensor body;
};

/// One whole frame. A payload over `max_payload` (pieces: over 4 GiB) is refused before it
/// is read; so are a bad header or shape (wire.hpp's checks) and, when `check_generation`,
/// another generation (errc::closed). A peer that closes mid-frame is errc::closed; one
/// that stops mid-frame, errc::timeout.
result<message> read_message(tcp_socket& s, std::uint64_t generation, std::uint64_t max_payload, milliseconds timeout,
                             bool check_generation = true);
status write_message(tcp_socket& s, std::uint64_t generation, std::uint64_t tag, std::uint32_t source,
                     const tensor& body, milliseconds timeout);

}  // namespace cohort::transport::control
