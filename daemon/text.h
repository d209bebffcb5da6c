// Tenant-supplied text (client names, command lines, anything a peer controls) on
// its way into logs, events and replies. A tenant must not be able to forge a log
// line (a newline), smuggle terminal escapes into an operator's neuronctl, or send
// bytes that are not UTF-8 (proto3 string fields must be UTF-8: one bad byte in a
// ListTenants reply would make every client fail to parse it).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace neuron::daemon {

// The text with every control character (C0, DEL, C1), backslash and byte that is
// not part of valid UTF-8 written as an escape (\n, \t, \\, \xNN), cut to at most
// max_bytes bytes of output without splitting an escape or a character.
std::string escape_text(std::string_view text, size_t max_bytes = 4096);

// escape_text in double quotes, with `"` escaped too: a log field value.
std::string quoted(std::string_view text);
// A log field value of text escape_text already escaped (a tenant's client_name
// or command as stored): in double quotes with `"` escaped, nothing escaped twice.
std::string quoted_escaped(std::string_view escaped);

} // namespace neuron::daemon
