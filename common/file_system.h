#pragma once
// What kind of file system holds a path: a network one (NFS, Lustre, GPFS, ...) shared between
// hosts, or a local one. hpod's store needs to know: SQLite's shared-memory WAL index does not
// work across hosts, so on a network file system the store is opened in exclusive mode.

#include <string>

namespace hpo {

// The name of the network file system under `path` ("nfs", "lustre", "gpfs", "cifs", "beegfs",
// "cephfs", "panfs"), or "" when it is a local one (or cannot be told).
std::string NetworkFileSystem(const std::string& path);

}  // namespace hpo
