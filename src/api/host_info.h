// Description of the host CPU as a coli device (COLI_DEVICE_CPU).
#pragma once

#include "coli/coli.h"

namespace coli {

void host_device_info(coli_device_info *info);

} // namespace coli
