#include "prom_text.h"

#include <cmath>
#include <cstdio>

namespace neuron::monitor {

std::string escape_label(const std::string &value)
{
	std::string out;
	out.reserve(value.size());
	for (const char c : value) {
		if (c == '\\')
			out += "\\\\";
		else if (c == '"')
			out += "\\\"";
		else if (c == '\n')
			out += "\\n";
		else
			out += c;
	}
	return out;
}

void PromText::family(const std::string &name, const std::string &type, const std::string &help)
{
	// HELP text escapes only backslash and newline.
	std::string h;
	for (const char c : help)
		h += c == '\\' ? std::string("\\\\") : c == '\n' ? std::string("\\n") : std::string(1, c);
	out_ += "# HELP " + name + " " + h + "\n# TYPE " + name + " " + type + "\n";
}

void PromText::sample(const std::string &name, const Labels &labels, double value)
{
	out_ += name;
	if (!labels.empty()) {
		out_ += "{";
		for (size_t i = 0; i < labels.size(); ++i)
			out_ += (i ? "," : "") + labels[i].first + "=\"" + escape_label(labels[i].second) + "\"";
		out_ += "}";
	}
	char buf[64];
	if (std::isinf(value))
		std::snprintf(buf, sizeof(buf), value > 0 ? "+Inf" : "-Inf");
	else
		std::snprintf(buf, sizeof(buf), "%.17g", value);
	out_ += " ";
	out_ += buf;
	out_ += "\n";
}

} // namespace neuron::monitor
