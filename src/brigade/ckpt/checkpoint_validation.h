#pragma once
// The checks every checkpoint reader shares (whole-tensor CheckpointReader and the sharded
// reader): load a folder's manifest, verify one listed file against its recorded size and
// CRC-32, and list the folders of a checkpoints root in the order a resume should try them.
// Every failure is a CheckpointError whose message starts with the offending path.
#include <functional>
#include <string>
#include <vector>

#include "brigade/ckpt/manifest.h"

namespace brigade {

// Reads and validates <dir>/manifest.json (structure only) and checks that a step_N folder
// name agrees with its step.
Manifest load_manifest(const std::string& dir);

// Checks that <dir>/<name> is a regular file with exactly `expected`'s size and CRC-32 (reads
// every byte once).
void verify_checkpoint_file(const std::string& dir, const std::string& name,
                            const FileDigest& expected);

// The committed checkpoint folder names under root in the order to try them: the one `latest`
// names first, then every other step_* folder, newest first. A `latest` that cannot be read or
// names no checkpoint folder is passed to reject() (one line). Empty if root does not exist.
// Throws IoError if root cannot be listed.
std::vector<std::string> checkpoint_candidates(
    const std::string& root, const std::function<void(const std::string&)>& reject);

// Removes trailing slashes ("/a/b//" -> "/a/b"; "/" stays).
std::string strip_trailing_slashes(std::string path);

// Reports a rejected checkpoint: one stderr line "[rank r] warning: checkpoint rejected: what",
// and the same text appended to *rejections when given.
void report_rejected_checkpoint(const std::string& what, std::vector<std::string>* rejections);

}  // namespace brigade
