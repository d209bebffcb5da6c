// Writes the Prometheus text exposition format (version 0.0.4): one "# HELP" and
// "# TYPE" per family, then its samples with escaped label values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace neuron::monitor {

using Labels = std::vector<std::pair<std::string, std::string>>;

class PromText {
public:
	// Starts a metric family; type is gauge, counter or histogram.
	void family(const std::string &name, const std::string &type, const std::string &help);
	// A sample of the current family (name may carry a suffix: _bucket, _sum, _count).
	void sample(const std::string &name, const Labels &labels, double value);
	const std::string &text() const { return out_; }

private:
	std::string out_;
};

// Escapes a label value: backslash, double quote and newline.
std::string escape_label(const std::string &value);

} // namespace neuron::monitor
