// The two CRC-32C implementations behind core::Crc32c (batch_codec.h), for
// batch_codec_test to check one against the other. Not for other callers.
#pragma once

#include <cstdint>
#include <string_view>

namespace tumbler::core::internal {

// Slicing-by-8, any processor.
uint32_t Crc32cPortable(std::string_view data, uint32_t crc);
// The SSE 4.2 crc32 instruction; only call it when Crc32cHardwareAvailable()
// (on other builds it is the portable code).
uint32_t Crc32cHardware(std::string_view data, uint32_t crc);
bool Crc32cHardwareAvailable();

}  // namespace tumbler::core::internal
