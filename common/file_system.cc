#include "common/file_system.h"

#include <sys/vfs.h>

#include <cstdint>

namespace hpo {

std::string NetworkFileSystem(const std::string& path) {
  struct statfs st {};
  if (::statfs(path.c_str(), &st) != 0) return "";
  // The magic numbers of linux/magic.h and of the file systems' own headers.
  switch (static_cast<uint32_t>(st.f_type)) {
    case 0x6969u:
      return "nfs";
    case 0x0BD00BD0u:
      return "lustre";
    case 0x47504653u:
      return "gpfs";
    case 0xFF534D42u:  // CIFS
    case 0xFE534D42u:  // SMB2
    case 0x517Bu:      // SMB
      return "cifs";
    case 0x19830326u:
      return "beegfs";
    case 0x00C36400u:
      return "cephfs";
    case 0xAAD7AAEAu:
      return "panfs";
    default:
      return "";
  }
}

}  // namespace hpo
