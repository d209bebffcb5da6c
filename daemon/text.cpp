#include "text.h"

#include <cstdint>

namespace neuron::daemon {

namespace {

// Length of the valid UTF-8 sequence at s[i] (1..4), or 0 if it is not one
// (overlong forms, surrogates and code points above U+10FFFF are not valid).
size_t utf8_length(std::string_view s, size_t i)
{
	const auto b = [&](size_t k) { return static_cast<uint8_t>(s[i + k]); };
	const uint8_t c = b(0);
	size_t n;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (i + n > s.size())
		return 0;
	for (size_t k = 1; k < n; ++k) {
		if ((b(k) & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (b(k) & 0x3f);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	// C1 controls (U+0080..U+009F) are terminal controls too.
	if (n == 2 && cp < 0xa0)
		return 0;
	return n;
}

std::string hex_escape(uint8_t c)
{
	static const char digits[] = "0123456789abcdef";
	return std::string("\\x") + digits[c >> 4] + digits[c & 15];
}

std::string escape(std::string_view text, size_t max_bytes, bool quote)
{
	std::string out;
	for (size_t i = 0; i < text.size();) {
		const auto c = static_cast<uint8_t>(text[i]);
		std::string piece;
		size_t used = 1;
		if (c == '\n')
			piece = "\\n";
		else if (c == '\t')
			piece = "\\t";
		else if (c == '\r')
			piece = "\\r";
		else if (c == '\\')
			piece = "\\\\";
		else if (quote && c == '"')
			piece = "\\\"";
		else if (c < 0x20 || c == 0x7f)
			piece = hex_escape(c);
		else if (const size_t n = utf8_length(text, i); n == 0)
			piece = hex_escape(c);
		else {
			piece.assign(text.substr(i, n));
			used = n;
		}
		if (out.size() + piece.size() > max_bytes)
			break;
		out += piece;
		i += used;
	}
	return out;
}

} // namespace

std::string escape_text(std::string_view text, size_t max_bytes) { return escape(text, max_bytes, false); }

std::string quoted(std::string_view text) { return "\"" + escape(text, 4096, true) + "\""; }

std::string quoted_escaped(std::string_view escaped)
{
	std::string out = "\"";
	for (const char c : escaped) {
		if (c == '"')
			out += '\\';
		out += c;
	}
	return out + "\"";
}

} // namespace neuron::daemon
