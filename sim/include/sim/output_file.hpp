// Output files a user can trust: written to a temporary file in the target directory, flushed
// to disk, and renamed into place only when complete, so a run killed mid-write, a full disk or
// a failed write leaves the previous file (or none) and never half a file. An existing file is
// replaced only when asked; a symbolic link at the target is never followed.
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <stdexcept>
#include <string>

namespace ctwin {

// The write itself failed (full disk, I/O error, directory gone): exit status 1 with the message.
struct OutputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws InputError (exit 2) naming `flag` when the target cannot be an output: it exists and
// `replace` is false, it is a symbolic link or not a regular file, or its directory is missing.
// Called before a long run so the user learns of it at once; write_file_atomically checks again.
void check_output_path(const std::filesystem::path& path, bool replace, const std::string& flag);

// Writes `path` through `write` into a temporary file beside it (same directory, so the rename
// is atomic), fsyncs it, then renames it into place (or, without `replace`, links it in only if
// the name is still free, so a file created meanwhile is never clobbered) and fsyncs the
// directory. On any failure the temporary file is removed and the target is untouched.
void write_file_atomically(const std::filesystem::path& path, bool replace, const std::string& flag,
                           const std::function<void(std::ostream&)>& write);

}  // namespace ctwin
