// Boost.Beast on Boost.Asio under `wgnn serve`: see http_server.h.
#include "tools/http_server.h"

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <strings.h>

#include <array>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <csignal>
#include <deque>
#include <set>
#include <limits>
#include <fmt/format.h>
#include <optional>
#include <thread>

#include "gpu/error.h"

namespace wgnn::tools::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::chrono::nanoseconds secs(double s) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::duration<double>(s));
}

}  // namespace

std::string Request::header(std::string_view name, size_t i) const {
  for (const auto& [k, v] : headers) {
    if (same_name(k, name) && i-- == 0) return v;
  }
  return "";
}

size_t Request::count(std::string_view name) const {
  size_t n = 0;
  for (const auto& [k, v] : headers) n += same_name(k, name);
  return n;
}

void Response::set(std::string name, std::string value) {
  for (auto& [k, v] : headers) {
    if (same_name(k, name)) {
      v = std::move(value);
      return;
    }
  }
  headers.emplace_back(std::move(name), std::move(value));
}

void Response::content(std::string b, std::string type) {
  body = std::move(b);
  set("Content-Type", std::move(type));
}

namespace {
class Conn;
}

struct Server::Impl {
  Config cfg;
  Routes routes;
  asio::io_context ioc{1};
  tcp::acceptor acceptor{ioc};
  asio::thread_pool workers;
  asio::signal_set signals{ioc};
  std::function<void(int)> on_signal;
  std::atomic<bool> draining{false};
  std::atomic<size_t> open{0}, in_request{0};
  std::atomic<uint64_t> idle_closed{0}, header_timeouts{0}, body_timeouts{0}, refused{0}, gone{0}, half_closed{0};
  int port = 0;
  // Connections whose request a worker serves (the I/O thread's only).
  std::set<std::shared_ptr<Conn>> waiting;

  Impl(Config c, Routes r) : cfg(std::move(c)), routes(std::move(r)), workers(size_t(std::max(1, cfg.workers))) {}

  void accept();
  void refuse(tcp::socket s);
};

namespace {

// One connection: its requests one after another, every step on the I/O
// thread.
class Conn : public std::enable_shared_from_this<Conn> {
 public:
  Conn(Server::Impl& srv, tcp::socket s) : srv_(srv), stream_(std::move(s)) { ++srv_.open; }
  ~Conn() {
    if (busy_) --srv_.in_request;
    --srv_.open;
  }

  void start() { next(); }

 private:
  Server::Impl& srv_;
  beast::tcp_stream stream_;
  beast::flat_buffer buf_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::shared_ptr<Request> req_;
  std::shared_ptr<Client> client_;
  std::shared_ptr<bhttp::response<bhttp::string_body>> out_;
  std::shared_ptr<std::string> raw_out_;
  std::array<char, 4096> drop_{};
  unsigned version_ = 11;   // the request's HTTP version
  bool busy_ = false;       // counted in in_request
  bool watching_ = false;   // a read on the socket while a worker serves
  bool probing_ = false;    // the half-close probe being written
  bool half_closed_ = false;
  bool answered_ = false;   // the worker's answer came while probing
  Response pending_;
  asio::steady_timer timer_{srv_.ioc};

  void set_busy(bool b) {
    if (b != busy_) b ? ++srv_.in_request : --srv_.in_request;
    busy_ = b;
  }

  void close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  // The next request: its first byte within idle_s, its headers within
  // header_s of it.
  void next() {
    set_busy(false);
    req_.reset();
    client_.reset();
    if (srv_.draining && buf_.size() == 0) return close();
    parser_.emplace();
    parser_->header_limit(uint32_t(srv_.cfg.header_bytes));
    // The route sets the body's limit once the headers are in (a
    // Content-Length over it is the route's answer, not a parse error).
    parser_->body_limit(std::numeric_limits<std::uint64_t>::max());
    if (buf_.size() > 0) return read_header(Clock::now());
    stream_.expires_after(secs(srv_.cfg.idle_s));
    stream_.async_read_some(buf_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      if (ec) {
        if (ec == beast::error::timeout) ++self->srv_.idle_closed;
        return self->close();
      }
      self->buf_.commit(n);
      self->read_header(Clock::now());
    });
  }

  void read_header(Clock::time_point t0) {
    stream_.expires_after(secs(srv_.cfg.header_s));
    bhttp::async_read_header(stream_, buf_, *parser_,
                             [self = shared_from_this(), t0](beast::error_code ec, size_t) { self->on_header(ec, t0); });
  }

  void fail(const std::string& method, const std::string& path, int status, const std::string& why) {
    if (srv_.routes.error) srv_.routes.error(method, path, status, why);
    if (status == 0) return close();
    Response res;
    res.status = status;
    res.content(fmt::format("error: {}\n", why), "text/plain; charset=utf-8");
    res.close = true;
    write(std::move(res));
  }

  void on_header(beast::error_code ec, Clock::time_point t0) {
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted || ec == bhttp::error::partial_message) {
      return close();
    }
    if (ec == beast::error::timeout) {
      ++srv_.header_timeouts;
      return fail("-", "-", 408, fmt::format("the request's headers took longer than {} s", srv_.cfg.header_s));
    }
    if (ec == bhttp::error::header_limit) {
      // The parser takes the request line and each header as they come:
      // no target yet means a request line longer than the limit.
      if (parser_->get().target().empty()) {
        return fail("-", "-", 414, fmt::format("the request line is longer than {} KiB", srv_.cfg.target_bytes >> 10));
      }
      return fail("-", "-", 431,
                  fmt::format("the request line and headers are longer than {} KiB", srv_.cfg.header_bytes >> 10));
    }
    if (ec == bhttp::error::bad_content_length) {
      return fail("-", "-", 400, "Content-Length is not a number, or two different Content-Lengths");
    }
    if (ec) return fail("-", "-", 400, fmt::format("the request cannot be read as HTTP/1.1 ({})", ec.message()));
    const auto& h = parser_->get();
    auto req = std::make_shared<Request>();
    req->method = std::string(h.method_string());
    req->target = std::string(h.target());
    const size_t q = req->target.find('?');
    req->path = req->target.substr(0, q);
    if (q != std::string::npos) req->query = req->target.substr(q + 1);
    req->version = h.version();
    version_ = req->version;
    req->t0 = t0;
    size_t n = 0;
    for (const auto& f : h) {
      if (++n > srv_.cfg.header_count) {
        return fail(req->method, req->path, 431, fmt::format("more than {} header fields", srv_.cfg.header_count));
      }
      req->headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    }
    if (req->target.size() > srv_.cfg.target_bytes) {
      return fail(req->method, "-", 414, fmt::format("the request line is longer than {} KiB", srv_.cfg.target_bytes >> 10));
    }
    req_ = req;
    set_busy(true);
    Response res;
    uint64_t limit = 0;
    if (srv_.routes.head(*req, res, &limit)) {
      // Answered without its body: a body that may follow is not read.
      const bool has_body = parser_->chunked() || (parser_->content_length() && *parser_->content_length() > 0);
      if (has_body || srv_.draining || !h.keep_alive()) res.close = true;
      req_.reset();
      return write(std::move(res));
    }
    parser_->body_limit(limit);
    if (same_name(req->header("Expect"), "100-continue") && req->version >= 11) {
      raw_out_ = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
      stream_.expires_after(secs(srv_.cfg.write_s));
      asio::async_write(stream_, asio::buffer(*raw_out_), [self = shared_from_this()](beast::error_code e, size_t) {
        if (e) return self->close();
        self->read_body();
      });
      return;
    }
    read_body();
  }

  void read_body() {
    stream_.expires_after(secs(srv_.cfg.body_s));
    bhttp::async_read(stream_, buf_, *parser_, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_body(ec);
    });
  }

  void on_body(beast::error_code ec) {
    const std::string method = req_->method, path = req_->path;
    if (ec == bhttp::error::body_limit) {
      Response res;
      srv_.routes.too_large(*req_, res);
      res.close = true;
      req_.reset();
      return write(std::move(res));
    }
    if (ec == beast::error::timeout) {
      ++srv_.body_timeouts;
      req_.reset();
      return fail(method, path, 408, fmt::format("the request's body took longer than {} s", srv_.cfg.body_s));
    }
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == bhttp::error::partial_message) {
      req_.reset();
      return fail(method, path, 0, "the client closed its connection before its body was in");
    }
    if (ec) {
      req_.reset();
      return fail(method, path, 400,
                  fmt::format("the request body could not be read (cut short, or a broken chunked encoding: {})",
                              ec.message()));
    }
    req_->body = parser_->release().body();
    const bool keep = parser_->get().keep_alive();
    keep_ = keep;
    parser_.reset();
    client_ = std::make_shared<Client>();
    {
      // A streamed answer's head and pieces, from the worker to this thread.
      std::weak_ptr<Conn> weak = shared_from_this();
      Client* c = client_.get();
      client_->begin_fn = [this, weak, c](const Response& head) {
        auto conn = weak.lock();
        if (!conn || c->gone) return false;
        asio::post(srv_.ioc, [conn, head]() mutable { conn->stream_begin(std::move(head)); });
        return true;
      };
      client_->send_fn = [this, weak, c](std::string piece) {
        auto conn = weak.lock();
        if (!conn || c->gone) return false;
        asio::post(srv_.ioc, [conn, piece = std::move(piece)]() mutable { conn->stream_piece(std::move(piece)); });
        return true;
      };
    }
    // The worker: the answer comes back to this thread.
    auto self = shared_from_this();
    srv_.waiting.insert(self);
    asio::post(srv_.workers, [self, req = std::move(req_), client = client_, keep]() mutable {
      Response res;
      self->srv_.routes.work(*req, res, client);
      if (!keep) res.close = true;
      req.reset();  // what admitted it is let go before the answer is written
      asio::post(self->srv_.ioc, [self, res = std::move(res)]() mutable { self->answer(std::move(res)); });
    });
    stream_.expires_never();
    watch();
  }

  // While the worker serves: a read on the socket tells a client that goes
  // away. Bytes that come (a pipelined request) are kept for later, up to
  // 64 KiB.
  void watch() {
    if (buf_.size() >= (64 << 10) || !client_) return;
    watching_ = true;
    stream_.socket().async_read_some(buf_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->watching_ = false;
      if (!ec) self->buf_.commit(n);  // kept even when answered meanwhile (the next request)
      if (!self->client_) return;     // answered meanwhile
      if (!ec) return self->watch();
      // Mid-stream, an end of stream is a client gone (no probe: the
      // interim answer would land inside the body).
      if (ec == asio::error::eof && self->version_ >= 11 && !self->streaming_) return self->probe();
      if (ec != asio::error::operation_aborted) self->mark_gone();
    });
  }

  void mark_gone() {
    if (client_ && !client_->gone.exchange(true)) ++srv_.gone;
  }

  // End of stream while the worker serves: closed, or half-closed? An
  // interim answer is written; a closed socket's peer answers it with a
  // reset.
  void probe() {
    probing_ = true;
    raw_out_ = std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n");
    asio::async_write(stream_.socket(), asio::buffer(*raw_out_), [self = shared_from_this()](beast::error_code ec,
                                                                                          size_t) {
      if (ec) {
        self->mark_gone();
        return self->probed();
      }
      self->timer_.expires_after(std::chrono::milliseconds(50));
      self->timer_.async_wait([self](beast::error_code) {
        pollfd p{self->stream_.socket().native_handle(), short(POLLIN | POLLRDHUP), 0};
        if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLERR | POLLHUP | POLLNVAL))) {
          self->mark_gone();
        } else if (self->client_ && !self->client_->gone) {
          self->half_closed_ = true;
          ++self->srv_.half_closed;
        }
        self->probed();
      });
    });
  }

  void probed() {
    probing_ = false;
    if (streaming_) return pump();
    if (answered_) {
      answered_ = false;
      write(std::move(pending_));
    }
  }

  // A streamed answer (Client::begin): the head, then the pieces, each
  // written after the one before; the worker's answer ends it.
  bool streaming_ = false;     // its head was written or queued
  bool stream_chunked_ = false;
  bool stream_close_ = false;  // close the connection after it
  bool stream_ended_ = false;  // the worker returned
  bool stream_failed_ = false; // a write failed: the rest is dropped
  bool stream_writing_ = false;
  bool keep_ = true;  // the request asked for keep-alive
  std::deque<std::string> stream_q_;

 public:
  void stream_begin(Response head) {
    if (!client_ || streaming_) return;  // answered already (answer_waiting)
    streaming_ = true;
    srv_.waiting.erase(shared_from_this());  // answer_waiting cannot answer it any more
    stream_chunked_ = version_ >= 11;
    stream_close_ = head.close || !keep_ || !stream_chunked_ || srv_.draining || half_closed_;
    std::string h = fmt::format("HTTP/1.1 {} {}\r\n", head.status,
                                std::string(bhttp::obsolete_reason(bhttp::status(unsigned(head.status)))));
    for (const auto& [k, v] : head.headers) h += fmt::format("{}: {}\r\n", k, v);
    if (stream_chunked_) h += "Transfer-Encoding: chunked\r\n";
    h += stream_close_ ? "Connection: close\r\n\r\n" : "\r\n";
    stream_q_.push_back(std::move(h));
    pump();
  }
  void stream_piece(std::string piece) {
    if (!streaming_ || stream_ended_ || piece.empty()) return;
    if (stream_chunked_) piece = fmt::format("{:x}\r\n{}\r\n", piece.size(), piece);
    stream_q_.push_back(std::move(piece));
    pump();
  }

 private:
  void stream_end() {
    stream_ended_ = true;
    client_.reset();
    if (watching_) {
      beast::error_code ec;
      stream_.socket().cancel(ec);
    }
    if (stream_chunked_ && !stream_failed_) stream_q_.push_back("0\r\n\r\n");
    pump();
  }
  void pump() {
    if (stream_writing_ || probing_) return;
    if (stream_failed_) stream_q_.clear();
    if (stream_q_.empty()) {
      if (!stream_ended_) return;
      streaming_ = stream_ended_ = false;
      if (stream_failed_) return close();
      if (stream_close_ || half_closed_ || srv_.draining) return linger();
      return next();
    }
    stream_writing_ = true;
    raw_out_ = std::make_shared<std::string>(std::move(stream_q_.front()));
    stream_q_.pop_front();
    stream_.expires_after(secs(srv_.cfg.write_s));
    asio::async_write(stream_, asio::buffer(*raw_out_), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->stream_writing_ = false;
      if (ec) {
        self->stream_failed_ = true;
        self->mark_gone();
      }
      self->pump();
    });
  }

 public:
  // The worker's answer, or one given in its place (answer_waiting); the
  // first of them is written. After a streamed head, the worker's answer
  // ends the stream.
  void answer(Response res) {
    if (!client_) return;  // answered already
    if (streaming_) return stream_end();
    client_.reset();
    auto self = shared_from_this();
    srv_.waiting.erase(self);
    if (watching_) {
      beast::error_code ec;
      stream_.socket().cancel(ec);
    }
    if (half_closed_) res.close = true;
    if (probing_) {
      pending_ = std::move(res);
      answered_ = true;
      return;
    }
    write(std::move(res));
  }

 private:
  void write(Response res) {
    set_busy(true);
    if (srv_.draining) res.close = true;
    auto out = std::make_shared<bhttp::response<bhttp::string_body>>();
    out->result(unsigned(res.status));
    out->version(11);
    for (auto& [k, v] : res.headers) out->insert(k, v);
    out->body() = std::move(res.body);
    out->keep_alive(!res.close);
    out->prepare_payload();
    out_ = out;
    const bool close_after = res.close;
    stream_.expires_after(secs(srv_.cfg.write_s));
    bhttp::async_write(stream_, *out_, [self = shared_from_this(), close_after](beast::error_code ec, size_t) {
      self->out_.reset();
      if (ec) return self->close();
      if (close_after || self->half_closed_) return self->linger();
      self->next();
    });
  }

  // After an answer that ends the connection: no more is sent, and what the
  // client still sends is read and dropped for a while (closing a socket
  // with unread bytes resets it, and the client may lose the answer).
  void linger() {
    set_busy(false);
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(secs(srv_.cfg.linger_s));
    drop();
  }
  void drop() {
    stream_.async_read_some(asio::buffer(drop_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->dropped_ += n;
      if (ec || self->dropped_ > kMostDropped) return self->close();
      self->drop();
    });
  }
  static constexpr uint64_t kMostDropped = uint64_t(64) << 20;
  uint64_t dropped_ = 0;
};

}  // namespace

void Server::Impl::refuse(tcp::socket s) {
  ++refused;
  auto sock = std::make_shared<tcp::socket>(std::move(s));
  auto text = std::make_shared<std::string>();
  const std::string body = fmt::format("error: busy: {} connections are open, the most this server keeps\n",
                                       cfg.max_connections);
  *text = fmt::format(
      "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
      "Connection: close\r\nContent-Length: {}\r\n\r\n{}",
      body.size(), body);
  asio::async_write(*sock, asio::buffer(*text), [sock, text](beast::error_code, size_t) {
    beast::error_code ec;
    sock->shutdown(tcp::socket::shutdown_both, ec);
    sock->close(ec);
  });
}

void Server::Impl::accept() {
  acceptor.async_accept([this](beast::error_code ec, tcp::socket s) {
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
    if (ec) {
      // Out of descriptors (or another passing error): try again shortly
      // rather than spin.
      auto t = std::make_shared<asio::steady_timer>(ioc, std::chrono::milliseconds(50));
      t->async_wait([this, t](beast::error_code) { accept(); });
      return;
    }
    beast::error_code e2;
    s.set_option(tcp::no_delay(true), e2);
    if (open.load() >= cfg.max_connections) {
      refuse(std::move(s));
    } else {
      std::make_shared<Conn>(*this, std::move(s))->start();
    }
    accept();
  });
}

Server::Server(Config config, Routes routes) : impl_(std::make_unique<Impl>(std::move(config), std::move(routes))) {
  Impl& m = *impl_;
  beast::error_code ec;
  const auto addr = asio::ip::make_address(m.cfg.host, ec);
  if (ec) throw Error(fmt::format("cannot listen on {}: not an IP address ({})", m.cfg.host, ec.message()));
  const tcp::endpoint ep(addr, uint16_t(m.cfg.port));
  m.acceptor.open(ep.protocol(), ec);
  if (!ec) m.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep, ec);
  if (!ec) m.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    if (m.cfg.port == 0) throw Error(fmt::format("cannot listen on {}: no free port ({})", m.cfg.host, ec.message()));
    throw Error(fmt::format("cannot listen on {}:{}: the port is taken or the address is not this machine's "
                            "(--port 0 picks a free one; {})",
                            m.cfg.host, m.cfg.port, ec.message()));
  }
  m.port = m.acceptor.local_endpoint().port();
}

Server::~Server() {
  impl_->workers.join();
}

int Server::port() const { return impl_->port; }

void Server::run(std::function<void(int)> on_signal) {
  Impl& m = *impl_;
  m.on_signal = std::move(on_signal);
  m.signals.add(SIGTERM);
  m.signals.add(SIGINT);
  m.signals.async_wait([&m](beast::error_code ec, int sig) {
    if (ec) return;
    // A second signal ends the process at once.
    beast::error_code e2;
    m.signals.clear(e2);
    std::signal(SIGTERM, SIG_DFL);
    std::signal(SIGINT, SIG_DFL);
    if (m.on_signal) m.on_signal(sig);
  });
  m.accept();
  m.ioc.run();
}

void Server::stop_accepting() {
  Impl& m = *impl_;
  m.draining = true;
  asio::post(m.ioc, [&m] {
    beast::error_code ec;
    m.acceptor.close(ec);
  });
}

void Server::stop() { impl_->ioc.stop(); }

void Server::answer_waiting(int status, std::string why) {
  Impl& m = *impl_;
  asio::post(m.ioc, [&m, status, why = std::move(why)] {
    const auto waiting = m.waiting;  // answer() erases from it
    for (const auto& c : waiting) {
      Response res;
      res.status = status;
      res.content(fmt::format("error: {}\n", why), "text/plain; charset=utf-8");
      res.set("Retry-After", "1");
      res.close = true;
      c->answer(std::move(res));
    }
  });
}

size_t Server::connections() const { return impl_->open.load(); }
size_t Server::busy() const { return impl_->in_request.load(); }

Server::Counts Server::counts() const {
  const Impl& m = *impl_;
  return {m.idle_closed.load(), m.header_timeouts.load(), m.body_timeouts.load(),
          m.refused.load(),     m.gone.load(),            m.half_closed.load()};
}

void Server::every(double every_s, std::function<bool()> f) {
  auto t = std::make_shared<asio::steady_timer>(impl_->ioc);
  auto tick = std::make_shared<std::function<void()>>();
  *tick = [t, tick, f = std::move(f), every_s] {
    t->expires_after(secs(every_s));
    t->async_wait([t, tick, &f](beast::error_code ec) {
      if (ec || !f()) {
        *tick = nullptr;  // ends the cycle
        return;
      }
      (*tick)();
    });
  };
  (*tick)();
}

Fields parse_query(std::string_view q) {
  auto decode = [](std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      const auto hex = [](char c) {
        return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      };
      if (s[i] == '+') {
        out += ' ';
      } else if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
        out += char(hex(s[i + 1]) * 16 + hex(s[i + 2]));
        i += 2;
      } else {
        out += s[i];
      }
    }
    return out;
  };
  Fields out;
  size_t at = 0;
  while (at <= q.size()) {
    const size_t amp = std::min(q.find('&', at), q.size());
    const std::string_view kv = q.substr(at, amp - at);
    if (!kv.empty()) {
      const size_t eq = kv.find('=');
      out.emplace_back(decode(kv.substr(0, eq)), eq == std::string_view::npos ? "" : decode(kv.substr(eq + 1)));
    }
    at = amp + 1;
  }
  return out;
}

bool form_file(std::string_view content_type, std::string_view body, std::string_view name, std::string* out,
               std::string* why) {
  std::string boundary;
  if (size_t b = content_type.find("boundary="); b != std::string_view::npos) {
    std::string_view v = content_type.substr(b + 9);
    if (!v.empty() && v[0] == '"') {
      v = v.substr(1);
      v = v.substr(0, v.find('"'));
    } else {
      v = v.substr(0, v.find(';'));
    }
    boundary = std::string(v);
  }
  if (boundary.empty()) {
    *why = "a multipart form without a boundary";
    return false;
  }
  const std::string delim = "--" + boundary;
  size_t at = body.find(delim);
  std::vector<std::pair<std::string, std::string_view>> parts;
  while (at != std::string_view::npos) {
    at += delim.size();
    if (body.substr(at, 2) == "--") break;  // the closing delimiter
    if (body.substr(at, 2) != "\r\n") break;
    at += 2;
    const size_t end_head = body.find("\r\n\r\n", at);
    if (end_head == std::string_view::npos) break;
    const std::string_view head = body.substr(at, end_head - at);
    const size_t next = body.find("\r\n" + delim, end_head + 4);
    if (next == std::string_view::npos) {
      *why = "the form is cut short (a part without its closing boundary)";
      return false;
    }
    std::string part_name;
    if (size_t n = head.find("name=\""); n != std::string_view::npos) {
      part_name = std::string(head.substr(n + 6, head.find('"', n + 6) - (n + 6)));
    }
    if (parts.size() >= 16) {
      *why = "a form of more than 16 parts";
      return false;
    }
    parts.emplace_back(part_name, body.substr(end_head + 4, next - (end_head + 4)));
    at = next + 2;
  }
  if (parts.empty()) {
    *why = "the form holds no file: send the photo as the field 'file'";
    return false;
  }
  size_t pick = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].first == name) {
      pick = i;
      break;
    }
  }
  *out = std::string(parts[pick].second);
  return true;
}

uint64_t raise_open_files() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 0;
  if (r.rlim_cur < r.rlim_max) {
    rlimit want = r;
    want.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &want) == 0) r = want;
  }
  return uint64_t(r.rlim_cur);
}

}  // namespace wgnn::tools::http
