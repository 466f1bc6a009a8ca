#include "lib/service/common/dispatcher_client.h"

#include "lib/service/common/names.h"
#include "spdlog/spdlog.h"

namespace tfdata::service {

void ReleaseClientQuietly(DispatcherClient& dispatcher, int64_t client_id) {
  ReleaseClientRequest req;
  req.set_client_id(client_id);
  ReleaseClientResponse resp;
  if (auto st = dispatcher.ReleaseClient(req, &resp); !st.ok()) {
    spdlog::debug("reader: releasing {} failed: {}", ClientName(client_id), st.ToString());
  }
}

}  // namespace tfdata::service
