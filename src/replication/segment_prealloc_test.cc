// posix_fallocate as tumbler defines it (segment_prealloc.cc): allocated,
// extended with zeros, and never a byte of existing data changed.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>

namespace {

class SegmentPreallocTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tumbler-prealloc-test-XXXXXX";
    fd_ = mkstemp(tmpl);
    ASSERT_GE(fd_, 0);
    path_ = tmpl;
  }
  void TearDown() override {
    close(fd_);
    unlink(path_.c_str());
  }
  std::string ReadAll() {
    struct stat st;
    EXPECT_EQ(fstat(fd_, &st), 0);
    std::string data(static_cast<size_t>(st.st_size), '?');
    EXPECT_EQ(pread(fd_, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
    return data;
  }
  // Number of extents the filesystem still marks unwritten (allocated but
  // never written: the state that makes libraft's first write into each block
  // slow), or -1 if the filesystem cannot say (FIEMAP unsupported).
  int UnwrittenExtents() {
    constexpr unsigned kExtentsMax = 256;
    std::string buf(sizeof(struct fiemap) + kExtentsMax * sizeof(struct fiemap_extent), '\0');
    auto* fm = reinterpret_cast<struct fiemap*>(buf.data());
    fm->fm_start = 0;
    fm->fm_length = FIEMAP_MAX_OFFSET;
    fm->fm_flags = FIEMAP_FLAG_SYNC;
    fm->fm_extent_count = kExtentsMax;
    if (ioctl(fd_, FS_IOC_FIEMAP, fm) != 0) return -1;
    int unwritten = 0;
    for (unsigned i = 0; i < fm->fm_mapped_extents; ++i) {
      if (fm->fm_extents[i].fe_flags & FIEMAP_EXTENT_UNWRITTEN) ++unwritten;
    }
    return unwritten;
  }
  int fd_ = -1;
  std::string path_;
};

TEST_F(SegmentPreallocTest, ExtendsAnEmptyFileWithWrittenZeros) {
  ASSERT_EQ(posix_fallocate(fd_, 0, 1 << 20), 0);
  std::string data = ReadAll();
  ASSERT_EQ(data.size(), 1u << 20);
  EXPECT_EQ(data.find_first_not_of('\0'), std::string::npos);
  struct stat st;
  ASSERT_EQ(fstat(fd_, &st), 0);
  // Blocks are really allocated (512-byte units), not a sparse hole.
  EXPECT_GE(static_cast<off_t>(st.st_blocks) * 512, 1 << 20);
  // The point of it all: nothing is left unwritten (glibc's posix_fallocate
  // would leave the whole range unwritten on ext4 and xfs).
  int unwritten = UnwrittenExtents();
  ASSERT_GE(unwritten, 0) << "the filesystem of /tmp cannot report extents (FIEMAP)";
  EXPECT_EQ(unwritten, 0);
}

TEST_F(SegmentPreallocTest, NeverChangesExistingData) {
  const std::string head(10000, 'x');
  ASSERT_EQ(pwrite(fd_, head.data(), head.size(), 0), static_cast<ssize_t>(head.size()));
  // A range that starts inside the data and runs past its end.
  ASSERT_EQ(posix_fallocate(fd_, 4096, 65536), 0);
  std::string data = ReadAll();
  ASSERT_EQ(data.size(), 4096u + 65536u);
  EXPECT_EQ(data.substr(0, head.size()), head);
  EXPECT_EQ(data.find_first_not_of('\0', head.size()), std::string::npos);
  // A range wholly inside the data changes nothing, not even the size.
  ASSERT_EQ(posix_fallocate(fd_, 0, 100), 0);
  EXPECT_EQ(ReadAll(), data);
}

TEST_F(SegmentPreallocTest, BadArgumentsAreErrorNumbers) {
  EXPECT_EQ(posix_fallocate(fd_, -1, 10), EINVAL);
  EXPECT_EQ(posix_fallocate(fd_, 0, 0), EINVAL);
  EXPECT_EQ(posix_fallocate(-1, 0, 10), EBADF);
}

}  // namespace
