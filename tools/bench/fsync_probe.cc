#include "fsync_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace tumbler::bench {
namespace {

constexpr size_t kBlockBytes = 4096;

Status WriteFailed(const std::string& path, const char* what) {
  return Status(StatusCode::kUnavailable,
                "fsync probe: " + path + ": " + what + ": " + std::strerror(errno));
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Writes and syncs `samples` blocks so that overwriting them changes no metadata.
Status Preallocate(int fd, int samples, const char* block, const std::string& path) {
  for (int i = 0; i < samples; ++i) {
    if (write(fd, block, kBlockBytes) != static_cast<ssize_t>(kBlockBytes)) {
      return WriteFailed(path, "write");
    }
  }
  if (fsync(fd) != 0 || lseek(fd, 0, SEEK_SET) != 0) return WriteFailed(path, "fsync");
  return Status::Ok();
}

// kAppend and kOverwrite: write() + fdatasync() on an ordinary descriptor.
Status ProbeBuffered(int fd, int samples, FsyncMode mode, const std::string& path,
                     std::vector<int64_t>* out) {
  char block[kBlockBytes];
  std::memset(block, 'x', sizeof(block));
  if (mode == FsyncMode::kOverwrite) {
    if (Status s = Preallocate(fd, samples, block, path); !s.ok()) return s;
  }
  for (int i = 0; i < samples; ++i) {
    const int64_t start = NowNs();
    if (write(fd, block, sizeof(block)) != static_cast<ssize_t>(sizeof(block))) {
      return WriteFailed(path, "write");
    }
    if (fdatasync(fd) != 0) return WriteFailed(path, "fdatasync");
    out->push_back(NowNs() - start);
  }
  return Status::Ok();
}

// kDirectDsync: the descriptor is O_DIRECT|O_DSYNC, so each pwrite returns
// once the block is on stable storage; O_DIRECT needs an aligned buffer.
Status ProbeDirect(int fd, int samples, const std::string& path, std::vector<int64_t>* out) {
  if (fallocate(fd, 0, 0, kDirectProbeFileBytes) != 0) return WriteFailed(path, "fallocate");
  if (fsync(fd) != 0) return WriteFailed(path, "fsync");
  std::unique_ptr<void, decltype(&std::free)> block(std::aligned_alloc(kBlockBytes, kBlockBytes),
                                                    &std::free);
  if (block == nullptr) return Status(StatusCode::kUnavailable, "fsync probe: out of memory");
  std::memset(block.get(), 'x', kBlockBytes);
  constexpr int64_t kBlocks = kDirectProbeFileBytes / kBlockBytes;
  for (int i = 0; i < samples; ++i) {
    const off_t offset = static_cast<off_t>((i % kBlocks) * kBlockBytes);
    const int64_t start = NowNs();
    if (pwrite(fd, block.get(), kBlockBytes, offset) != static_cast<ssize_t>(kBlockBytes)) {
      return WriteFailed(path, "pwrite (O_DIRECT|O_DSYNC)");
    }
    out->push_back(NowNs() - start);
  }
  return Status::Ok();
}

}  // namespace

std::string_view FsyncModeName(FsyncMode mode) {
  switch (mode) {
    case FsyncMode::kAppend: return "append";
    case FsyncMode::kOverwrite: return "overwrite";
    case FsyncMode::kDirectDsync: return "direct_dsync";
  }
  return "?";
}

Result<std::vector<int64_t>> ProbeFsync(const std::string& dir, int samples, FsyncMode mode) {
  const std::string path = dir + "/tumbler-bench-fsync-probe." + std::to_string(getpid());
  int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  if (mode == FsyncMode::kDirectDsync) flags |= O_DIRECT | O_DSYNC;
  const int fd = open(path.c_str(), flags, 0600);
  if (fd < 0) {
    return WriteFailed(path, mode == FsyncMode::kDirectDsync ? "open O_DIRECT|O_DSYNC" : "open");
  }
  std::vector<int64_t> samples_ns;
  samples_ns.reserve(samples);
  const Status status = mode == FsyncMode::kDirectDsync
                            ? ProbeDirect(fd, samples, path, &samples_ns)
                            : ProbeBuffered(fd, samples, mode, path, &samples_ns);
  close(fd);
  unlink(path.c_str());
  if (!status.ok()) return status;
  return samples_ns;
}

}  // namespace tumbler::bench
