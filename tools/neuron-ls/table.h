// Box tables in the style of the AWS neuron-ls: multi-line headers, one row per
// line, columns as wide as their widest cell.
#pragma once

#include <string>
#include <vector>

namespace neuron::ls {

class Table {
public:
	// Header words are stacked one per line, as in "NEURON / DEVICE".
	explicit Table(std::vector<std::vector<std::string>> headers);
	void add_row(std::vector<std::string> cells);
	std::string render() const;

private:
	std::vector<std::vector<std::string>> headers_;
	std::vector<std::vector<std::string>> rows_;
};

} // namespace neuron::ls
