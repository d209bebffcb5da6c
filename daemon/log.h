// neurond's log: one line per event on stderr (the journal under systemd), with a
// UTC timestamp, level and key=value fields. Thread-safe (one write per line).
#pragma once

#include <string>
#include <string_view>

namespace neuron::daemon {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };

void set_log_level(LogLevel level);
// Parses "debug", "info", "warn", "error"; false if unknown.
bool parse_log_level(std::string_view text, LogLevel *out);
void log_line(LogLevel level, std::string_view event, const std::string &fields);

#define NLOG_DEBUG(event, fields) ::neuron::daemon::log_line(::neuron::daemon::LogLevel::Debug, event, fields)
#define NLOG_INFO(event, fields) ::neuron::daemon::log_line(::neuron::daemon::LogLevel::Info, event, fields)
#define NLOG_WARN(event, fields) ::neuron::daemon::log_line(::neuron::daemon::LogLevel::Warn, event, fields)
#define NLOG_ERROR(event, fields) ::neuron::daemon::log_line(::neuron::daemon::LogLevel::Error, event, fields)

} // namespace neuron::daemon
