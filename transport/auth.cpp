// HMAC-SHA256 challenge-response over OpenSSL's libcrypto (HMAC, RAND_bytes, CRYPTO_memcmp).
#include "transport/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <sys/stat.h>
#include <unistd.h>
#include <array>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace cohort::transport {
namespace {

constexpr char hello[8] = {'C', 'O', 'H', 'O', 'R', 'T', 'A', '1'};
constexpr std::size_t nonce_bytes = 32, mac_bytes = 32;
using nonce = std::array<unsigned char, nonce_bytes>;
using mac = std::array<unsigned char, mac_bytes>;

result<nonce> fresh_nonce() {
  nonce n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) return make_error(errc::io_error, "auth: no random bytes");
  return n;
}

mac sign(const std::string& secret, const char* role, const nonce& a, const nonce& b) {
  std::string msg(role);
  msg.append(reinterpret_cast<const char*>(a.data()), a.size());
  msg.append(reinterpret_cast<const char*>(b.data()), b.size());
  mac out{};
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(msg.data()),
       msg.size(), out.data(), &len);
  return out;
}

error failed(const tcp_socket& s, const std::string& why) {
  return {errc::io_error, "authentication failed with " + s.peer_name() + ": " + why};
}

status expect_hello(tcp_socket& s, milliseconds timeout) {
  char h[sizeof hello];
  if (auto st = s.recv_exact(h, sizeof h, timeout); !st) return failed(s, st.error().message);
  if (std::memcmp(h, hello, sizeof h) != 0) return failed(s, "the peer does not speak cohort's join protocol");
  return {};
}

}  // namespace

result<std::string> read_secret_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return make_error(errc::not_found, "job secret file " + path + " does not exist");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(errc::invalid_argument,
                      "job secret file " + path + " has mode " + mode + ": others may read it; chmod 600 " + path);
  }
  if (st.st_uid != ::getuid())
    return make_error(errc::invalid_argument, "job secret file " + path + " belongs to another user");
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (!in || s.empty()) return make_error(errc::io_error, "job secret file " + path + " is empty or unreadable");
  return s;
}

result<std::string> load_job_secret() {
  if (const char* f = std::getenv("COHORT_JOB_SECRET_FILE"); f != nullptr && *f != 0) return read_secret_file(f);
  if (const char* s = std::getenv("COHORT_JOB_SECRET"); s != nullptr) return std::string(s);
  return std::string();
}

status authenticate_server(tcp_socket& s, const std::string& secret, milliseconds timeout) {
  auto ns = fresh_nonce();
  if (!ns) return ns.error();
  std::array<unsigned char, sizeof hello + nonce_bytes> out{};
  std::memcpy(out.data(), hello, sizeof hello);
  std::memcpy(out.data() + sizeof hello, ns->data(), nonce_bytes);
  if (auto st = s.send_all(out.data(), out.size(), timeout); !st) return failed(s, st.error().message);
  if (auto st = expect_hello(s, timeout); !st) return st;
  nonce nc{};
  mac theirs{};
  if (auto st = s.recv_exact(nc.data(), nc.size(), timeout); !st) return failed(s, st.error().message);
  if (auto st = s.recv_exact(theirs.data(), theirs.size(), timeout); !st) return failed(s, st.error().message);
  const mac want = sign(secret, "client", *ns, nc);
  if (CRYPTO_memcmp(want.data(), theirs.data(), mac_bytes) != 0) return failed(s, "wrong job secret");
  const mac ours = sign(secret, "server", nc, *ns);
  if (auto st = s.send_all(ours.data(), ours.size(), timeout); !st) return failed(s, st.error().message);
  return {};
}

status authenticate_client(tcp_socket& s, const std::string& secret, milliseconds timeout) {
  if (auto st = expect_hello(s, timeout); !st) return st;
  nonce ns{};
  if (auto st = s.recv_exact(ns.data(), ns.size(), timeout); !st) return failed(s, st.error().message);
  auto nc = fresh_nonce();
  if (!nc) return nc.error();
  const mac ours = sign(secret, "client", ns, *nc);
  std::array<unsigned char, sizeof hello + nonce_bytes + mac_bytes> out{};
  std::memcpy(out.data(), hello, sizeof hello);
  std::memcpy(out.data() + sizeof hello, nc->data(), nonce_bytes);
  std::memcpy(out.data() + sizeof hello + nonce_bytes, ours.data(), mac_bytes);
  if (auto st = s.send_all(out.data(), out.size(), timeout); !st) return failed(s, st.error().message);
  mac theirs{};
  if (auto st = s.recv_exact(theirs.data(), theirs.size(), timeout); !st)
    return failed(
        s, st.error().code == errc::closed ? "the coordinator refused us (wrong job secret?)" : st.error().message);
  const mac want = sign(secret, "server", *nc, ns);
  if (CRYPTO_memcmp(want.data(), theirs.data(), mac_bytes) != 0)
    return failed(s, "the other side does not know the job secret");
  return {};
}

}  // namespace cohort::transport
