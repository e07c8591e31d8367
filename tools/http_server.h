// The HTTP/1.1 server under `wgnn serve`: Boost.Beast on Boost.Asio, one
// I/O thread for every connection (accept, read, write, all asynchronous)
// and a small pool of worker threads for the requests that need one (a
// photo to decode, wait for the GPU and encode). Slow and idle connections
// cost a socket and a few KiB each, never a thread.
//
// Limits, each answered with a status that says why: the request line and
// headers together (header_bytes: 431, or 414 for a request line alone over
// target_bytes), the number of header fields (431), the body whatever its
// transfer encoding (the route's limit: 413), open connections (503 at
// accept), and a timeout per phase: waiting for a request (idle_s: closed),
// its headers (header_s: 408), its body (body_s: 408), writing the answer
// (write_s). A connection whose answer is not the end of a clean exchange is
// closed after the answer with a lingering close (its unread bytes read and
// dropped for up to linger_s), so that the client reads the answer rather
// than a reset.
//
// While a worker serves a request, the I/O thread watches its connection:
// a client that closes it (or resets it) is marked gone (Client::gone), so
// that work not started yet can be dropped. A client that only half-closes
// (shutdown(SHUT_WR) after its request) is told apart by a probe, an interim
// "100 Continue" (which HTTP/1.1 clients skip): a closed socket answers it
// with a reset, a half-closed one takes it, and gets its answer.
//
// No Boost header here: tools/serve.cpp builds on this interface only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wgnn::tools::http {

using Clock = std::chrono::steady_clock;
using Fields = std::vector<std::pair<std::string, std::string>>;

struct Request {
  std::string method, target;
  std::string path;   // the target up to '?'
  std::string query;  // after '?'
  unsigned version = 11;  // 10 or 11
  Fields headers;
  std::string body;
  Clock::time_point t0;  // when its first byte came
  // Held until the request is done with (its worker returned, or its body
  // could not be read): what the route admitted it with.
  std::shared_ptr<void> hold;

  // The i-th value of a header (names compared without case), or "".
  std::string header(std::string_view name, size_t i = 0) const;
  size_t count(std::string_view name) const;
  bool has(std::string_view name) const { return count(name) > 0; }
};

struct Response {
  int status = 200;
  Fields headers;
  std::string body;
  bool close = false;  // close the connection after this answer

  void set(std::string name, std::string value);
  void content(std::string b, std::string type);
};

// A request's client as a worker sees it.
struct Client {
  std::atomic<bool> gone{false};  // closed or reset before its answer

  // An answer sent piece by piece as it is made (Server-Sent Events):
  // begin() writes the status line and `head`'s headers (its body is not
  // used), and the body goes out chunked (to an HTTP/1.0 client: until the
  // connection closes); send() queues one piece, written as soon as the
  // ones before it are. The worker's own Response, when it returns, only
  // ends the body. Any thread; never waits; false once the client is gone
  // (or the request was answered otherwise, by answer_waiting). While it
  // streams, the connection is watched as before (gone).
  bool begin(const Response& head) const { return begin_fn && begin_fn(head); }
  bool send(std::string piece) const { return send_fn && send_fn(std::move(piece)); }
  std::function<bool(const Response&)> begin_fn;  // set by the server
  std::function<bool(std::string)> send_fn;
};

struct Config {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port
  size_t header_bytes = 32 << 10;
  size_t header_count = 100;
  size_t target_bytes = 8 << 10;
  double idle_s = 10;    // for a (next) request's first byte
  double header_s = 10;  // from then to its last header
  double body_s = 60;    // for its body
  double write_s = 60;   // for an answer to be taken
  double linger_s = 2;   // a closing connection's unread bytes dropped for this long
  size_t max_connections = 4096;
  int workers = 8;
};

struct Routes {
  // On the I/O thread when a request's headers are in. True: `res` is the
  // answer (an error, or a page that needs no body; its body, if any, is
  // not read and the connection closes). False: its body is read, up to
  // *body_limit bytes, and `work` answers it on a worker.
  std::function<bool(Request&, Response&, uint64_t* body_limit)> head;
  // The answer to a body over its limit (the connection then closes).
  std::function<void(const Request&, Response&)> too_large;
  // On a worker thread, with the whole body.
  std::function<void(Request&, Response&, const std::shared_ptr<const Client>&)> work;
  // A request that could not be read, or its client's connection timed
  // out in a phase: its method and path when known ("-" otherwise), the
  // status answered (0: none, the connection was closed) and why.
  std::function<void(const std::string& method, const std::string& path, int status, const std::string& why)> error;
};

class Server {
 public:
  // Binds and listens (an error naming the address when the port is taken:
  // SO_REUSEADDR only, never SO_REUSEPORT).
  Server(Config config, Routes routes);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const;
  // Serves on this thread until stop(). `on_signal` is called on it when
  // SIGTERM or SIGINT comes (the first time; a second ends the process).
  void run(std::function<void(int)> on_signal);
  // Any thread: no more connections accepted; a connection between
  // requests is closed, a new request on an open one still gets its answer
  // (the routes say what), and each answer then closes its connection.
  void stop_accepting();
  // Any thread: every request that a worker still serves is answered now
  // with `status` and "error: <why>" (and its connection closed); the
  // worker's own answer, when it comes, is dropped.
  void answer_waiting(int status, std::string why);
  // Any thread: run() returns.
  void stop();
  // Connections open, and those with a request read and not yet answered
  // (its answer not yet written).
  size_t connections() const;
  size_t busy() const;
  // Connections closed by each phase's timeout, refused over the cap, and
  // clients gone before their answer.
  struct Counts {
    uint64_t idle_closed, header_timeouts, body_timeouts, refused, gone, half_closed;
  };
  Counts counts() const;
  // Calls `f` on the I/O thread every `every_s` seconds until it returns false.
  void every(double every_s, std::function<bool()> f);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Percent-decoded key=value pairs of a query string ('+' is a space).
Fields parse_query(std::string_view q);

// The file of a multipart/form-data body: the part named `name`, else the
// first. Empty with *why set when the body is no such form.
bool form_file(std::string_view content_type, std::string_view body, std::string_view name, std::string* out,
               std::string* why);

// Raises this process's soft limit on open files to its hard limit; the
// limit now.
uint64_t raise_open_files();

}  // namespace wgnn::tools::http
