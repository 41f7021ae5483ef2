// Who a staged file or folder is made for (staging::Store::Create, Mkdir):
// its own header, so that vfs::View's write calls can name it without the
// store.
#ifndef TFRECORDFS_STAGING_OWNER_H_
#define TFRECORDFS_STAGING_OWNER_H_

#include <sys/types.h>

namespace tfrecordfs::staging {

// Who a new file or folder is made for: the caller's ids (fuse_req_ctx). A
// daemon running as root gives what it makes to them, so that with
// allow_other (and its default_permissions) another user's files and folders
// in staging/ are that user's to write; a parent folder with the
// set-group-ID bit gives its own group instead, as a local file system
// does. An unprivileged daemon cannot give files away: what it makes stays
// its own (man page, allow_other).
struct Owner {
  uid_t uid = 0;
  gid_t gid = 0;
};

}  // namespace tfrecordfs::staging

#endif  // TFRECORDFS_STAGING_OWNER_H_
