// Is an address on this host? For --target-workers local (reader side) and COMPRESSION_AUTO
// (worker side: a reader on the same host is reached over loopback, never worth compressing for).
//
// Thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace tfdata::service {

// A gRPC peer string ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:/path") names this host:
// loopback, a Unix socket, or one of this machine's interface addresses (a reader on the
// worker's host that reached it at the worker's advertised address).
bool IsPeerOnThisHost(std::string_view peer);

// The host part of "host:port" (or "[v6]:port", "grpc://host:port") is this machine: localhost,
// a loopback address, this machine's host name, or one of its interfaces' addresses.
bool IsThisHost(std::string_view address);

}  // namespace tfdata::service
