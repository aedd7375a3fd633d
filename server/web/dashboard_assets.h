#pragma once
// The dashboard's page and scripts, built into hpod (server/dashboard/: index.html, app.js,
// app.css; and Chart.js from Debian's libjs-chart.js), so that hpod stays one file to install.
// Generated at build time by server/embed_assets.cmake.

#include <cstddef>
#include <vector>

namespace hpo::server {

struct Asset {
  const char* path;  // as served: "/", "/app.js", ...
  const char* type;  // its Content-Type
  const char* data;
  size_t size;
};

const std::vector<Asset>& DashboardAssets();

}  // namespace hpo::server
