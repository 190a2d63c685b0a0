#define BOOST_TEST_MODULE files
// The runtime's files (autograd/files.hpp): a file written in pieces appears whole or not
// at all, and a regular file mapped read-only. (Whole-file writes, their temporaries and
// writers killed mid-write: test_checkpoint.)
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <set>

#include "helpers.hpp"
#include "xgrad/autograd/files.hpp"
#include "xgrad/autograd/parallel.hpp"

using namespace xgrad;
using namespace xgrad::test;
namespace fs = std::filesystem;

namespace {

// Every name in `folder`, sorted.
std::vector<std::string> names_in(const fs::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(folder)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_streamed_file_appears_only_when_committed) {
  const fs::path folder = fresh_folder("test-files", "stream");
  const fs::path target = folder / "tokens.bin";
  AtomicFileWriter writer(target.string(), "shard");
  std::string expected;
  for (int chunk = 0; chunk < 50; ++chunk) {
    const std::string bytes(1000 + chunk, static_cast<char>('a' + chunk % 26));
    writer.write(bytes);
    expected += bytes;
    BOOST_CHECK(!fs::exists(target));  // only the temporary so far
  }
  BOOST_CHECK_EQUAL(writer.size(), expected.size());
  BOOST_CHECK_EQUAL(names_in(folder).size(), 1u);
  writer.write_at(3, "HEAD");  // a header known last
  expected.replace(3, 4, "HEAD");
  writer.commit();
  BOOST_CHECK(file_bytes(target) == expected);
  BOOST_CHECK(names_in(folder) == std::vector<std::string>{"tokens.bin"});  // no temporary left
}

BOOST_AUTO_TEST_CASE(a_writer_destroyed_without_commit_leaves_the_target_as_it_was) {
  const fs::path folder = fresh_folder("test-files", "abandoned");
  const fs::path old_file = folder / "old.bin", new_file = folder / "new.bin";
  put_file(old_file, "the old bytes");
  for (const fs::path& target : {old_file, new_file}) {
    {
      AtomicFileWriter writer(target.string(), "shard");
      writer.write("half of a file");
    }  // as when an exception unwinds
    try {
      AtomicFileWriter writer(target.string(), "shard");
      writer.write("another half");
      throw std::runtime_error("the caller failed");
    } catch (const std::runtime_error&) {
    }
  }
  BOOST_CHECK_EQUAL(file_bytes(old_file), "the old bytes");
  BOOST_CHECK(names_in(folder) == std::vector<std::string>{"old.bin"});
}

BOOST_AUTO_TEST_CASE(a_writer_takes_no_calls_after_commit_or_past_its_bytes) {
  const fs::path folder = fresh_folder("test-files", "misuse");
  const std::string target = (folder / "x.bin").string();
  AtomicFileWriter writer(target, "shard");
  writer.write("12345");
  check_error([&] { writer.write_at(3, "abc"); }, {"shard", "write_at(3, 3 bytes)", "past the 5 bytes written"});
  check_error([&] { writer.write_at(6, ""); }, {"past the 5 bytes written"});
  writer.write_at(5, "");  // the end itself is fine
  writer.commit();
  check_error([&] { writer.write("more"); }, {"shard", "write()", target, "after commit()"});
  check_error([&] { writer.write_at(0, "x"); }, {"write_at()", "after commit()"});
  check_error([&] { writer.commit(); }, {"commit()", "after commit()"});
  BOOST_CHECK_EQUAL(file_bytes(target), "12345");
}

// finish() flushes and closes without the rename: files committed together are all
// whole on disk first. A finished writer never committed leaves nothing.
BOOST_AUTO_TEST_CASE(a_finished_writer_commits_later_or_leaves_nothing) {
  const fs::path folder = fresh_folder("test-files", "finish");
  const std::string target = (folder / "x.bin").string();
  put_file(target, "old");
  {
    AtomicFileWriter abandoned(target, "shard");
    abandoned.write("never");
    abandoned.finish();
    check_error([&] { abandoned.write("more"); }, {"shard", "write()", "after finish()"});
    check_error([&] { abandoned.finish(); }, {"finish()", "after finish()"});
    BOOST_CHECK_EQUAL(names_in(folder).size(), 2u);  // x.bin and the finished temporary
  }
  BOOST_CHECK(names_in(folder) == std::vector<std::string>{"x.bin"});
  BOOST_CHECK_EQUAL(file_bytes(target), "old");
  AtomicFileWriter writer(target, "shard");
  writer.write("new");
  writer.finish();
  BOOST_CHECK_EQUAL(file_bytes(target), "old");
  writer.commit();
  BOOST_CHECK_EQUAL(file_bytes(target), "new");
  BOOST_CHECK(names_in(folder) == std::vector<std::string>{"x.bin"});
  check_error([&] { writer.commit(); }, {"commit()", "after commit()"});
}

// A signal that would end the process, arriving while files are renamed into place
// together, waits for the last SignalsDeferred to go: the renames all land, then the
// process dies of it (its handler run again) with nothing left unfinished.
BOOST_AUTO_TEST_CASE(a_signal_waits_for_files_committed_together) {
  BOOST_CHECK(!signal_deferred(SIGTERM));  // no deferral: the handler goes on
  const fs::path folder = fresh_folder("test-files", "deferred");
  const pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    std::signal(SIGTERM, [](int signal) {
      if (signal_deferred(signal)) return;
      remove_unfinished_outputs();
      std::signal(signal, SIG_DFL);
      std::raise(signal);
    });
    AtomicFileWriter a((folder / "a.bin").string(), "test"), b((folder / "b.bin").string(), "test");
    a.write("a");
    b.write("b");
    a.finish();
    b.finish();
    {
      const SignalsDeferred outer;
      {
        const SignalsDeferred inner;  // nested: the outer one's end raises it
        a.commit();
        std::raise(SIGTERM);
      }
      b.commit();
    }
    ::_exit(0);  // not reached
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  BOOST_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  BOOST_CHECK((names_in(folder) == std::vector<std::string>{"a.bin", "b.bin"}));
}

BOOST_AUTO_TEST_CASE(a_streamed_write_keeps_the_whole_file_rules) {
  const fs::path folder = fresh_folder("test-files", "rules");
  // Through a symlink: the file it points to is replaced, the link stays.
  const fs::path real = folder / "real.bin", link = folder / "link.bin";
  put_file(real, "old");
  ::chmod(real.c_str(), 0600);
  fs::create_symlink("real.bin", link);
  AtomicFileWriter through_link(link.string(), "shard");
  through_link.write("new");
  through_link.commit();
  BOOST_CHECK(fs::is_symlink(link));
  BOOST_CHECK_EQUAL(file_bytes(real), "new");
  BOOST_CHECK((fs::status(real).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
  // Never over a folder, a device or a FIFO; nothing where the folder is missing.
  const fs::path fifo = folder / "pipe";
  BOOST_REQUIRE_EQUAL(::mkfifo(fifo.c_str(), 0600), 0);
  check_error([&] { AtomicFileWriter(folder.string(), "shard"); }, {"shard", "is a folder", "refusing to replace it"});
  check_error([&] { AtomicFileWriter("/dev/null", "shard"); }, {"'/dev/null' is a device"});
  check_error([&] { AtomicFileWriter(fifo.string(), "shard"); }, {"is a FIFO"});
  check_error([&] { AtomicFileWriter("/nonexistent-folder/x.bin", "shard"); },
              {"cannot create", "/nonexistent-folder"});
  check_error([&] { AtomicFileWriter("", "shard"); }, {"shard", "the file name is empty"});
}

BOOST_AUTO_TEST_CASE(a_mapped_file_holds_the_files_bytes) {
  const fs::path folder = fresh_folder("test-files", "map");
  std::string bytes;
  for (int i = 0; i < 100000; ++i) bytes += static_cast<char>(i * 7919 % 256);
  put_file(folder / "data.bin", bytes);
  put_file(folder / "empty.bin", "");
  const MappedFile mapped((folder / "data.bin").string(), "shard");
  BOOST_CHECK(mapped.bytes() == bytes);
  BOOST_CHECK_EQUAL(mapped.path(), (folder / "data.bin").string());
  const MappedFile empty((folder / "empty.bin").string(), "shard");
  BOOST_CHECK(empty.bytes().empty());

  // Replaced by a rename (as xgrad writes files) while mapped: the map keeps the old bytes.
  write_file_atomically((folder / "data.bin").string(), "replaced", "test");
  BOOST_CHECK(mapped.bytes() == bytes);

  // Moves hand the map over; the moved-from object holds nothing.
  MappedFile first((folder / "empty.bin").string(), "shard");
  MappedFile second((folder / "data.bin").string(), "shard");
  first = std::move(second);
  BOOST_CHECK_EQUAL(first.bytes(), "replaced");
  BOOST_CHECK(second.bytes().empty());
  const MappedFile third(std::move(first));
  BOOST_CHECK_EQUAL(third.bytes(), "replaced");
}

BOOST_AUTO_TEST_CASE(a_file_the_system_reports_as_empty_is_read_to_its_end) {
  // /proc's files report a size of 0 and are made as they are read: read, not mapped.
  // /proc/self/maps names this process's libraries, many KiB, past one read's 64 KiB on
  // most builds; its first line is the same in both reads.
  const std::string read = read_regular_file("/proc/self/maps", "text");
  MappedFile mapped("/proc/self/maps", "text");
  BOOST_TEST(read.size() > 1000u);
  BOOST_TEST(read.back() == '\n');
  BOOST_TEST(mapped.bytes().size() > 1000u);
  BOOST_TEST(read.substr(0, read.find('\n')) == mapped.bytes().substr(0, mapped.bytes().find('\n')));
  BOOST_TEST(read_regular_file("/proc/self/status", "text").find("Name:") == 0u);
  // Moved, the read bytes go along.
  const std::string before(mapped.bytes());
  const MappedFile moved(std::move(mapped));
  BOOST_TEST(moved.bytes() == before);
  BOOST_TEST(mapped.bytes().empty());
}

BOOST_AUTO_TEST_CASE(only_a_regular_file_is_mapped_and_the_error_names_it) {
  const fs::path folder = fresh_folder("test-files", "map-refusals");
  const fs::path fifo = folder / "pipe";
  BOOST_REQUIRE_EQUAL(::mkfifo(fifo.c_str(), 0600), 0);
  const auto refused = [](const std::string& path, const std::string& why) {
    check_error([&] { MappedFile(path, "token shard"); }, {"token shard", "'" + path + "'", why});
  };
  refused(folder.string(), "is a folder, not a file");
  refused(fifo.string(), "is a FIFO, not a file");  // refused at once: opening never waits for a writer
  refused("/dev/null", "is a device, not a file");
  refused("/dev/zero", "is a device, not a file");
  refused((folder / "missing.bin").string(), "cannot open");
  check_error([] { MappedFile("", "token shard"); }, {"token shard", "the file name is empty"});
  // read_regular_file refuses the same, naming the file too.
  check_error([&] { read_regular_file(fifo.string(), "text"); }, {"text", fifo.string(), "is a FIFO"});
}

BOOST_AUTO_TEST_CASE(a_fingerprint_is_the_same_on_any_thread_count_and_moves_with_any_byte) {
  // Past three 1 MiB chunks, with a tail that is no whole word.
  std::string bytes(3 * (std::size_t{1} << 20) + 21, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  set_num_threads(1);
  const std::uint64_t one = fingerprint(bytes);
  for (const int threads : {2, 3}) {
    set_num_threads(threads);
    BOOST_CHECK_EQUAL(fingerprint(bytes), one);
  }
  set_num_threads(2);
  // One bit anywhere (a chunk's first and last byte, a word's middle, the tail), two
  // bytes swapped, a byte more or less: each another fingerprint.
  std::set<std::uint64_t> seen{one};
  for (const std::size_t at : {std::size_t{0}, (std::size_t{1} << 20) - 1, std::size_t{1} << 20, std::size_t{12345},
                               bytes.size() - 1, bytes.size() - 20}) {
    std::string changed = bytes;
    changed[at] = static_cast<char>(changed[at] ^ 1);
    BOOST_CHECK_MESSAGE(seen.insert(fingerprint(changed)).second, "a bit flipped at byte " << at);
  }
  std::string swapped = bytes;
  std::swap(swapped[100], swapped[(std::size_t{1} << 20) + 100]);
  BOOST_CHECK(seen.insert(fingerprint(swapped)).second);
  BOOST_CHECK(seen.insert(fingerprint(bytes + '\0')).second);
  BOOST_CHECK(seen.insert(fingerprint(bytes.substr(0, bytes.size() - 1))).second);
  // Zeros of other lengths differ too (the length is part of it), the empty string included.
  for (const std::size_t length : {0, 1, 8, 32, 33})
    BOOST_CHECK_MESSAGE(seen.insert(fingerprint(std::string(length, '\0'))).second, length << " zeros");
}

// What a tool's handler of Ctrl-C does before dying of it: the temporaries of writers
// still open are removed, and the files and folders listed as unfinished (the folders
// only once empty, inner ones listed after or before their parent); committed files,
// other files and the folders holding them stay, as do paths listed by objects gone.
BOOST_AUTO_TEST_CASE(unfinished_outputs_are_removed_for_a_dying_process) {
  const fs::path folder = fresh_folder("test-files", "dying");
  const pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    using Kind = RemovedIfKilled::Kind;
    write_file_atomically((folder / "done.bin").string(), "whole", "test");
    AtomicFileWriter first((folder / "a.bin").string(), "test"), second((folder / "b.bin").string(), "test");
    first.write(std::string(1 << 20, 'x'));
    second.write("part");
    // An output of nested folders, the outer listed last; one holding a user's file.
    fs::create_directories(folder / "out" / "inner" / "deepest");
    fs::create_directories(folder / "kept");
    write_file_atomically((folder / "out" / "inner" / "shard.bin").string(), "shard", "test");
    write_file_atomically((folder / "kept" / "user.txt").string(), "user's", "test");
    write_file_atomically((folder / "released.bin").string(), "finished", "test");
    std::vector<RemovedIfKilled> unfinished;
    for (const char* path : {"out/inner", "out/inner/deepest", "out", "kept"})
      unfinished.emplace_back((folder / path).string(), Kind::folder);
    unfinished.emplace_back((folder / "out" / "inner" / "shard.bin").string(), Kind::file);
    unfinished.emplace_back((folder / "released.bin").string(), Kind::file).release();
    { RemovedIfKilled gone((folder / "done.bin").string(), Kind::file); }
    // Moved, it stays listed once.
    RemovedIfKilled moved = std::move(unfinished[4]);  // the shard
    std::signal(SIGTERM, [](int signal) {
      remove_unfinished_outputs();
      std::signal(signal, SIG_DFL);
      std::raise(signal);
    });
    std::raise(SIGTERM);
    ::_exit(0);  // not reached
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  BOOST_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
  BOOST_CHECK((names_in(folder) == std::vector<std::string>{"done.bin", "kept", "released.bin"}));
  BOOST_CHECK(fs::exists(folder / "kept" / "user.txt"));
}
