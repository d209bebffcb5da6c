#include "rank_names.h"

#include <regex>

namespace torch_neuron::dist {

int64_t RankNames::of(int64_t local) const
{
	return local >= 0 && static_cast<size_t>(local) < global_.size() ? global_[local] : local;
}

std::string RankNames::translate(const std::string &message) const
{
	if (global_.empty())
		return message;
	// "rank 3", "rank(s) 0, 2": the numbers after either word (neurond's formats,
	// daemon/collective_groups.cpp).
	static const std::regex ranks(R"(\brank(\(s\))? (\d+(, \d+)*))");
	static const std::regex number(R"(\d+)");
	std::string out;
	auto last = message.cbegin();
	for (std::sregex_iterator it(message.begin(), message.end(), ranks), end; it != end; ++it) {
		const std::smatch &m = *it;
		out.append(last, m[2].first);
		const std::string list = m[2].str();
		auto from = list.cbegin();
		for (std::sregex_iterator n(list.begin(), list.end(), number); n != end; ++n) {
			out.append(from, (*n)[0].first);
			out += std::to_string(of(std::stoll(n->str())));
			from = (*n)[0].second;
		}
		out.append(from, list.cend());
		last = m[2].second;
	}
	out.append(last, message.cend());
	return out;
}

} // namespace torch_neuron::dist
