// Output shared by every command (see command.hpp).
#include "command.hpp"

#include "text.hpp"

namespace gpmkit {

void emit(const context& ctx, const json::value& result) {
  if (ctx.json) {
    json::write(*ctx.out, result);
    *ctx.out << '\n';
  } else {
    write_text(*ctx.out, result);
  }
  ctx.out->flush();
}

void note(const context& ctx, const std::string& text) {
  *ctx.err << "gpmkit: note: " << printable(text) << '\n';
}

}  // namespace gpmkit
