// Input for `deltafin chat`: reads lines straight from a file descriptor (no stdio
// buffering) so that a SIGINT interrupts the wait, and joins lines into messages:
//   - a line ending in a backslash continues on the next line;
//   - a line starting with """ opens a block that runs to a line ending in """.
// A terminal in canonical mode does the line editing; a pipe or file works the
// same way, one message per line.
#pragma once
#include <atomic>
#include <functional>
#include <string>

namespace deltafin::tools {

enum class InputStatus { Ok, Eof, Interrupted };

class LineInput {
 public:
  // `interrupted` is set by the SIGINT handler; read_line() returns Interrupted
  // when it is set before or while waiting (and leaves it set).
  LineInput(int fd, const std::atomic<bool>* interrupted) : fd_(fd), interrupted_(interrupted) {}
  // One line without its '\n' (a final line without '\n' counts too).
  InputStatus read_line(std::string* line);

 private:
  int fd_;
  const std::atomic<bool>* interrupted_;
  std::string buf_;
  bool eof_ = false;
};

// Reads one message. `prompt(first)` is called before each line is read (first:
// the message's first line) to print a prompt. Eof in the middle of a message
// returns what was read so far as Ok (the next call returns Eof).
InputStatus read_message(LineInput& in, const std::function<void(bool first)>& prompt, std::string* message);

}  // namespace deltafin::tools
