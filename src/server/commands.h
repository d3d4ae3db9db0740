// The command table: every command tumblerd accepts, declared as data (name,
// arity, flags, syntax, summary, handler). It drives dispatch, COMMAND's reply
// and `tumblerd --commands` (docs are checked against it).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tumbler::server {

class Server;
class Connection;

enum class Dispatched : uint8_t {
  kDone,   // the request was handled (replied, or handed to the log)
  kStall,  // the batch is full: leave the request in the buffer, retry later
  kParked, // waits for the server (a read barrier): left in the buffer, and
           // the server processes the connection again when it may go on
};

using Args = std::span<const std::string_view>;
using Handler = Dispatched (*)(Server& server, Connection& conn, Args args);

enum CommandFlags : uint32_t {
  kFlagWrite = 1u << 0,      // goes through the log; may pipeline behind other writes
  kFlagNeedsState = 1u << 1, // reads the state machine: needs a serving leader
  kFlagNoAuth = 1u << 2,     // allowed before AUTH
};

struct CommandSpec {
  std::string_view name;     // "LOCK", or "SESSION OPEN" for a subcommand
  int args_min;              // counting every word, the command's own included
  int args_max;              // -1: no upper bound (still limits::kRequestArgsMax)
  uint32_t flags;
  std::string_view syntax;
  std::string_view summary;
  Handler handler;
};

// Every command, in the order COMMAND lists them.
std::span<const CommandSpec> CommandTable();

// The spec for a request, or nullptr for an unknown command.
const CommandSpec* FindCommand(Args args);

// True if the request is a log write that may be pipelined behind other pending
// writes of its connection without breaking reply order.
bool IsPipelinedWrite(Args args);

// Checks arity, auth and role, then runs the handler.
Dispatched Dispatch(Server& server, Connection& conn, Args args);

}  // namespace tumbler::server
