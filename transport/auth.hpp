// Joining a job proves knowledge of the job secret: a mutual HMAC-SHA256 challenge-response
// on every connection, before either side reads anything else from the other. Fixed-size
// messages only, so an unauthenticated peer cannot make us allocate or parse anything.
//
//   server: 8-byte hello "COHORTA1" + 32-byte nonce Ns
//   client: "COHORTA1" + nonce Nc + HMAC(secret, "client" | Ns | Nc)
//   server: HMAC(secret, "server" | Nc | Ns)          (or closes: wrong secret)
//
// The secret comes from COHORT_JOB_SECRET_FILE (a file readable by its owner only: mode 0600
// or stricter) or COHORT_JOB_SECRET. Without one the key is empty: the handshake still runs
// (and still rejects strangers speaking another protocol), which is what loopback-only jobs
// get; binding anything but loopback requires a secret.
//
//   auto secret = load_job_secret();                  // result<std::string>, "" when none
//   if (!secret) return secret.error();               // e.g. a secret file others may read (its mode named)
//   auto listener = tcp_listener::open("127.0.0.1", 0);
//   if (!listener) return listener.error();
//   std::thread server([&] {                          // the accepting side
//     auto s = listener->accept(5s);
//     status st = s ? authenticate_server(*s, *secret, 5s) : status(s.error());
//   });
//   auto c = tcp_socket::connect("127.0.0.1", listener->port(), 5s);
//   status st = c ? authenticate_client(*c, *secret, 5s) : status(c.error());   // the connecting side
//   server.join();
#pragma once

#include <string>

#include "transport/socket.hpp"

namespace cohort::transport {

/// The job secret from the environment ("" when neither variable is set). Errors: an
/// unreadable or empty file, a file others may read or write (naming its mode).
result<std::string> load_job_secret();

/// The job secret from a file; the same checks as load_job_secret.
result<std::string> read_secret_file(const std::string& path);

/// Accepting side. errc::io_error "authentication failed ..." for a wrong secret or a peer
/// that does not speak the protocol.
status authenticate_server(tcp_socket& s, const std::string& secret, milliseconds timeout);
/// Connecting side.
status authenticate_client(tcp_socket& s, const std::string& secret, milliseconds timeout);

}  // namespace cohort::transport
