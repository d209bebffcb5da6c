#include "table.h"

#include <algorithm>

namespace neuron::ls {

Table::Table(std::vector<std::vector<std::string>> headers) : headers_(std::move(headers)) {}

void Table::add_row(std::vector<std::string> cells)
{
	cells.resize(headers_.size());
	rows_.push_back(std::move(cells));
}

std::string Table::render() const
{
	std::vector<size_t> width(headers_.size(), 0);
	size_t header_lines = 0;
	for (size_t c = 0; c < headers_.size(); ++c) {
		header_lines = std::max(header_lines, headers_[c].size());
		for (const auto &w : headers_[c])
			width[c] = std::max(width[c], w.size());
		for (const auto &r : rows_)
			width[c] = std::max(width[c], r[c].size());
	}
	auto rule = [&] {
		std::string s = "+";
		for (size_t w : width)
			s += std::string(w + 2, '-') + "+";
		return s + "\n";
	};
	auto line = [&](auto cell) {
		std::string s = "|";
		for (size_t c = 0; c < width.size(); ++c) {
			std::string v = cell(c);
			s += " " + v + std::string(width[c] - v.size(), ' ') + " |";
		}
		return s + "\n";
	};
	std::string out = rule();
	for (size_t l = 0; l < header_lines; ++l)
		out += line([&](size_t c) { return l < headers_[c].size() ? headers_[c][l] : std::string(); });
	out += rule();
	for (const auto &r : rows_)
		out += line([&](size_t c) { return r[c]; });
	out += rule();
	return out;
}

} // namespace neuron::ls
