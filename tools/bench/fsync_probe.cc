#include "fsync_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace tumbler::bench {
namespace {

constexpr size_t kBlockBytes = 4096;

Status WriteFailed(const std::string& path) {
  return Status(StatusCode::kUnavailable, "fsync probe: " + path + ": " + std::strerror(errno));
}

// Writes and syncs `samples` blocks so that overwriting them changes no metadata.
Status Preallocate(int fd, int samples, const char* block, const std::string& path) {
  for (int i = 0; i < samples; ++i) {
    if (write(fd, block, kBlockBytes) != static_cast<ssize_t>(kBlockBytes)) {
      return WriteFailed(path);
    }
  }
  if (fsync(fd) != 0 || lseek(fd, 0, SEEK_SET) != 0) return WriteFailed(path);
  return Status::Ok();
}

}  // namespace

Result<LatencyHistogram> ProbeFsync(const std::string& dir, int samples, FsyncMode mode) {
  const std::string path = dir + "/tumbler-bench-fsync-probe." + std::to_string(getpid());
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return WriteFailed(path);
  char block[kBlockBytes];
  std::memset(block, 'x', sizeof(block));
  LatencyHistogram histogram;
  Status status;
  if (mode == FsyncMode::kOverwrite) status = Preallocate(fd, samples, block, path);
  for (int i = 0; i < samples && status.ok(); ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (write(fd, block, sizeof(block)) != static_cast<ssize_t>(sizeof(block)) ||
        fdatasync(fd) != 0) {
      status = WriteFailed(path);
      break;
    }
    histogram.Record(std::chrono::duration_cast<std::chrono::nanoseconds>(
                         std::chrono::steady_clock::now() - start)
                         .count());
  }
  close(fd);
  unlink(path.c_str());
  if (!status.ok()) return status;
  return histogram;
}

}  // namespace tumbler::bench
