#include "log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <unistd.h>

namespace neuron::daemon {

static std::atomic<int> g_level{static_cast<int>(LogLevel::Info)};

void set_log_level(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool parse_log_level(std::string_view text, LogLevel *out)
{
	static const std::pair<std::string_view, LogLevel> names[] = {
		{"debug", LogLevel::Debug}, {"info", LogLevel::Info}, {"warn", LogLevel::Warn}, {"error", LogLevel::Error}};
	for (const auto &[name, level] : names) {
		if (text == name) {
			*out = level;
			return true;
		}
	}
	return false;
}

void log_line(LogLevel level, std::string_view event, const std::string &fields)
{
	if (static_cast<int>(level) < g_level.load(std::memory_order_relaxed))
		return;
	static const char *names[] = {"debug", "info", "warn", "error"};
	const auto now = std::chrono::system_clock::now();
	const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
	const std::time_t secs = static_cast<std::time_t>(ms / 1000);
	struct tm tm;
	gmtime_r(&secs, &tm);
	char stamp[32];
	std::strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	std::string line = std::string(stamp) + "." + std::to_string(1000 + ms % 1000).substr(1) + "Z " +
			   names[static_cast<int>(level)] + " " + std::string(event);
	if (!fields.empty())
		line += " " + fields;
	line += "\n";
	// One write(2) per line keeps lines from different threads whole.
	(void)!write(STDERR_FILENO, line.data(), line.size());
}

} // namespace neuron::daemon
