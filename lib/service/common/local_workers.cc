#include "lib/service/common/local_workers.h"

#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tfdata::service {
namespace {

absl::Mutex g_mu;
std::map<std::string, std::weak_ptr<LocalEndpoint>>& Directory() ABSL_EXCLUSIVE_LOCKS_REQUIRED(g_mu) {
  static auto* workers = new std::map<std::string, std::weak_ptr<LocalEndpoint>>();  // never destroyed
  return *workers;
}

}  // namespace

void AddLocalWorker(const std::string& address, std::weak_ptr<LocalEndpoint> worker) {
  absl::MutexLock lock(&g_mu);
  Directory()[address] = std::move(worker);
}

void RemoveLocalWorker(const std::string& address, const LocalEndpoint* worker) {
  absl::MutexLock lock(&g_mu);
  auto it = Directory().find(address);
  if (it != Directory().end() && (it->second.expired() || it->second.lock().get() == worker)) Directory().erase(it);
}

std::shared_ptr<LocalEndpoint> FindLocalWorker(const std::string& address) {
  absl::MutexLock lock(&g_mu);
  auto it = Directory().find(address);
  return it == Directory().end() ? nullptr : it->second.lock();
}

bool AnyLocalWorker() {
  absl::MutexLock lock(&g_mu);
  for (const auto& [address, w] : Directory()) {
    if (!w.expired()) return true;
  }
  return false;
}

}  // namespace tfdata::service
