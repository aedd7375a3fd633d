#include "common/clock.h"

namespace hpo {

SystemClock& SystemClock::Get() {
  static SystemClock clock;
  return clock;
}

}  // namespace hpo
