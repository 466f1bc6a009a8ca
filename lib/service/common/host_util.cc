#include "lib/service/common/host_util.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <set>

namespace tfdata::service {
namespace {

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// The host part of an address without a scheme or port.
std::string HostOf(std::string_view address) {
  if (auto p = address.find("://"); p != std::string_view::npos) address.remove_prefix(p + 3);
  if (StartsWith(address, "[")) {
    const auto close = address.find(']');
    return std::string(address.substr(1, close == std::string_view::npos ? std::string_view::npos : close - 1));
  }
  const auto colon = address.rfind(':');
  // One colon: host:port. More: a bare IPv6 address.
  if (colon != std::string_view::npos && address.find(':') == colon) address = address.substr(0, colon);
  return std::string(address);
}

bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || StartsWith(host, "127.") || host == "::1" || host == "0.0.0.0" || host == "::";
}

// This machine's names and interface addresses (looked up once).
const std::set<std::string>& LocalNames() {
  static const std::set<std::string>* names = [] {
    auto* out = new std::set<std::string>();
    char name[256] = {};
    if (gethostname(name, sizeof(name) - 1) == 0) out->insert(name);
    ifaddrs* list = nullptr;
    if (getifaddrs(&list) == 0) {
      for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
        if (i->ifa_addr == nullptr) continue;
        char buf[INET6_ADDRSTRLEN] = {};
        if (i->ifa_addr->sa_family == AF_INET) {
          inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, buf, sizeof(buf));
        } else if (i->ifa_addr->sa_family == AF_INET6) {
          inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, buf, sizeof(buf));
        } else {
          continue;
        }
        out->insert(buf);
      }
      freeifaddrs(list);
    }
    return out;
  }();
  return *names;
}

}  // namespace

bool IsPeerOnThisHost(std::string_view peer) {
  auto local = [](const std::string& host) { return IsLoopbackHost(host) || LocalNames().contains(host); };
  if (StartsWith(peer, "unix:")) return true;
  if (StartsWith(peer, "ipv4:")) return local(HostOf(peer.substr(5)));
  if (StartsWith(peer, "ipv6:")) {
    std::string rest(peer.substr(5));
    // Some gRPC versions percent-encode the brackets.
    for (auto [from, to] : {std::pair{"%5B", "["}, std::pair{"%5D", "]"}}) {
      for (size_t p; (p = rest.find(from)) != std::string::npos;) rest.replace(p, 3, to);
    }
    return local(HostOf(rest));
  }
  return false;
}

bool IsThisHost(std::string_view address) {
  const std::string host = HostOf(address);
  return IsLoopbackHost(host) || LocalNames().contains(host);
}

}  // namespace tfdata::service
