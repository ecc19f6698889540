// A stand-in for libFuzzer's main in ordinary builds: runs LLVMFuzzerTestOneInput once over every
// regular file named on the command line or found (recursively) in a named directory, in sorted
// path order. CTest runs it over fuzz/corpus/<name>/ (fuzz_replay_<name>), so the seed corpus is a
// regression suite; an invariant violation aborts, which fails the test.
// usage: fuzz_replay_<name> (DIR | FILE)...
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s (DIR | FILE)...\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path p(argv[i]);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(p, ec)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "%s: no such file or directory\n", argv[i]);
      return 2;
    }
    if (ec) {
      std::fprintf(stderr, "%s: %s\n", argv[i], ec.message().c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "no inputs found: an empty corpus replays nothing\n");
    return 1;
  }
  uint64_t bytes = 0;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "%s: cannot read\n", f.c_str());
      return 2;
    }
    const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // An exactly sized heap copy, so a sanitizer build catches a read past the input's end.
    auto copy = std::make_unique<uint8_t[]>(std::max<size_t>(content.size(), 1));
    std::copy(content.begin(), content.end(), copy.get());
    std::fprintf(stderr, "replay %s (%zu bytes)\n", f.c_str(), content.size());
    LLVMFuzzerTestOneInput(copy.get(), content.size());
    bytes += content.size();
  }
  std::printf("replayed %zu inputs (%llu bytes), no invariant violated\n", files.size(),
              static_cast<unsigned long long>(bytes));
  return 0;
}
