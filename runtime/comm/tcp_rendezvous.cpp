// See tcp_rendezvous.h.
#include "zrt/runtime/comm/tcp_rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <utility>

#include "zrt/runtime/error.h"

namespace zrt {

namespace {

using Clock = std::chrono::steady_clock;

// Every message starts with this, so a stray connection (another job on the
// port, a port scanner) is told apart from a rank.
constexpr std::uint32_t kMagic = 0x5a525452;  // "ZRTR"

struct Header {
  std::uint32_t magic;
  std::uint32_t size;
  std::uint32_t rank;
  std::uint32_t pad;
  std::uint64_t round;
  std::uint64_t length;
};

// An owned socket descriptor.
class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  int fd() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

int ms_left(Clock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1 << 30));
}

// Waits until `fd` is ready for `events`; false when the deadline passed.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, ms_left(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

// Sends or receives all of `bytes`; a short transfer throws CommError with `what`.
void send_all(int fd, const void* data, std::size_t n, Clock::time_point deadline,
              const std::string& what) {
  const auto* p = static_cast<const char*>(data);
  while (n > 0) {
    ZRT_CHECK_AS(CommError, wait_fd(fd, POLLOUT, deadline), what, ": timed out sending");
    ssize_t k = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    ZRT_CHECK_AS(CommError, k > 0, what, ": send failed: ", std::strerror(errno));
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}

void recv_all(int fd, void* data, std::size_t n, Clock::time_point deadline,
              const std::string& what) {
  auto* p = static_cast<char*>(data);
  while (n > 0) {
    ZRT_CHECK_AS(CommError, wait_fd(fd, POLLIN, deadline), what, ": timed out receiving");
    ssize_t k = ::recv(fd, p, n, MSG_DONTWAIT);
    if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    ZRT_CHECK_AS(CommError, k != 0, what, ": the peer closed the connection");
    ZRT_CHECK_AS(CommError, k > 0, what, ": recv failed: ", std::strerror(errno));
    p += k;
    n -= static_cast<std::size_t>(k);
  }
}

// One non-blocking connect attempt to any address of addr:port; an invalid
// socket when nobody accepted before the deadline.
Socket try_connect(const std::string& addr, int port, Clock::time_point deadline,
                   std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(addr.c_str(), service.c_str(), &hints, &found); rc != 0) {
    error = std::string("cannot resolve the address: ") + ::gai_strerror(rc);
    return Socket();
  }
  Socket result;
  for (addrinfo* a = found; a != nullptr && result.fd() < 0; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol));
    if (s.fd() < 0) continue;
    if (::connect(s.fd(), a->ai_addr, a->ai_addrlen) != 0) {
      if (errno != EINPROGRESS || !wait_fd(s.fd(), POLLOUT, deadline)) {
        error = std::strerror(errno);
        continue;
      }
      int so_error = 0;
      socklen_t len = sizeof so_error;
      ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &so_error, &len);
      if (so_error != 0) {
        error = std::strerror(so_error);
        continue;
      }
    }
    result = std::move(s);
  }
  ::freeaddrinfo(found);
  return result;
}

}  // namespace

TcpRendezvous::TcpRendezvous(std::string master_addr, int master_port, int rank, int size,
                             std::chrono::milliseconds timeout)
    : addr_(std::move(master_addr)),
      port_(master_port),
      rank_(rank),
      size_(size),
      timeout_(timeout) {
  ZRT_CHECK_ARG(size >= 1 && rank >= 0 && rank < size, "tcp rendezvous: rank ", rank,
                " is not in a world of size ", size);
  ZRT_CHECK_ARG(master_port >= 0 && master_port <= 65535 && (rank == 0 || master_port > 0),
                "tcp rendezvous: MASTER_PORT ", master_port, " is not a port number");
  ZRT_CHECK_ARG(rank == 0 || !addr_.empty(), "tcp rendezvous: rank ", rank,
                " needs MASTER_ADDR to reach rank 0");
  ZRT_CHECK_ARG(timeout.count() > 0, "tcp rendezvous: timeout must be positive");
  if (rank != 0 || size == 1) return;
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ZRT_CHECK_AS(CommError, s.fd() >= 0, where(), ": socket failed: ", std::strerror(errno));
  int one = 1;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_ANY);
  sa.sin_port = htons(static_cast<std::uint16_t>(master_port));
  ZRT_CHECK_AS(CommError, ::bind(s.fd(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0, where(),
               ": rank 0 cannot listen on port ", master_port, ": ", std::strerror(errno));
  ZRT_CHECK_AS(CommError, ::listen(s.fd(), std::min(size, 4096)) == 0, where(),
               ": listen failed: ", std::strerror(errno));
  socklen_t len = sizeof sa;
  ::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&sa), &len);
  port_ = ntohs(sa.sin_port);
  listen_fd_ = s.release();
}

TcpRendezvous::~TcpRendezvous() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::string TcpRendezvous::where() const {
  return "tcp rendezvous (" + (addr_.empty() ? std::string("*") : addr_) + ":" +
         std::to_string(port_) + ", rank " + std::to_string(rank_) + " of " +
         std::to_string(size_) + ", round " + std::to_string(round_) + ")";
}

std::vector<std::vector<std::byte>> TcpRendezvous::all_gather_bytes(
    std::span<const std::byte> mine) {
  std::vector<std::vector<std::byte>> out;
  if (size_ == 1)
    out.emplace_back(mine.begin(), mine.end());
  else
    out = rank_ == 0 ? gather_as_root(mine) : gather_as_peer(mine);
  ++round_;
  return out;
}

std::vector<std::vector<std::byte>> TcpRendezvous::gather_as_root(std::span<const std::byte> mine) {
  const auto deadline = Clock::now() + timeout_;
  std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(size_));
  std::vector<Socket> peers(static_cast<std::size_t>(size_));
  all[0].assign(mine.begin(), mine.end());
  for (int arrived = 1; arrived < size_;) {
    if (!wait_fd(listen_fd_, POLLIN, deadline)) {
      std::string missing;
      for (int r = 1; r < size_; ++r)
        if (peers[r].fd() < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      ZRT_THROW(CommError, where(), ": timed out after ", timeout_.count(),
                " ms waiting for rank(s) ", missing, " to connect");
    }
    Socket s(::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (s.fd() < 0) continue;
    Header h{};
    try {
      recv_all(s.fd(), &h, sizeof h, deadline, where() + ": reading a peer's header");
    } catch (const CommError&) {
      continue;  // a connection that is not a rank (it closed or said nothing)
    }
    if (h.magic != kMagic) continue;
    ZRT_CHECK_AS(CommError, h.size == static_cast<std::uint32_t>(size_), where(), ": rank ", h.rank,
                 " says the world has ", h.size, " ranks");
    ZRT_CHECK_AS(CommError, h.rank >= 1 && h.rank < h.size && peers[h.rank].fd() < 0, where(),
                 ": a peer claims rank ", h.rank, ", which is out of range or already taken");
    ZRT_CHECK_AS(CommError, h.round == round_, where(), ": rank ", h.rank, " is in round ",
                 h.round);
    all[h.rank].resize(h.length);
    recv_all(s.fd(), all[h.rank].data(), h.length, deadline,
             where() + ": reading rank " + std::to_string(h.rank) + "'s bytes");
    peers[h.rank] = std::move(s);
    ++arrived;
  }
  // One reply for everybody: (length, bytes) per rank, in rank order.
  std::vector<std::byte> reply;
  for (const auto& bytes : all) {
    const std::uint64_t n = bytes.size();
    const auto* p = reinterpret_cast<const std::byte*>(&n);
    reply.insert(reply.end(), p, p + sizeof n);
    reply.insert(reply.end(), bytes.begin(), bytes.end());
  }
  for (int r = 1; r < size_; ++r)
    send_all(peers[r].fd(), reply.data(), reply.size(), deadline,
             where() + ": replying to rank " + std::to_string(r));
  return all;
}

std::vector<std::vector<std::byte>> TcpRendezvous::gather_as_peer(std::span<const std::byte> mine) {
  const auto deadline = Clock::now() + timeout_;
  Socket s;
  std::string error = "no attempt";
  // Rank 0 may not be listening yet: retry until the deadline.
  for (auto pause = std::chrono::milliseconds(10);;
       pause = std::min(pause * 2, std::chrono::milliseconds(500))) {
    s = try_connect(addr_, port_, deadline, error);
    if (s.fd() >= 0) break;
    ZRT_CHECK_AS(CommError, Clock::now() + pause < deadline, where(),
                 ": could not reach rank 0 within ", timeout_.count(), " ms (last error: ", error,
                 ")");
    std::this_thread::sleep_for(pause);
  }
  int one = 1;
  ::setsockopt(s.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  const Header h{
      kMagic,     static_cast<std::uint32_t>(size_), static_cast<std::uint32_t>(rank_), 0, round_,
      mine.size()};
  const std::string what = where() + ": exchanging with rank 0";
  send_all(s.fd(), &h, sizeof h, deadline, what);
  send_all(s.fd(), mine.data(), mine.size(), deadline, what);
  std::vector<std::vector<std::byte>> all(static_cast<std::size_t>(size_));
  for (auto& bytes : all) {
    std::uint64_t n = 0;
    recv_all(s.fd(), &n, sizeof n, deadline, what);
    ZRT_CHECK_AS(CommError, n <= (std::uint64_t(1) << 32), what, ": rank 0 announced ", n,
                 " bytes");
    bytes.resize(n);
    recv_all(s.fd(), bytes.data(), n, deadline, what);
  }
  return all;
}

}  // namespace zrt
