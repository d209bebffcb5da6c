// libFuzzer target: the control-plane decoder neurond runs on every byte a client
// sends (frame splitting, then protobuf parsing of the Request). The input is cut
// into reads of fuzzer-chosen sizes, as a socket would deliver it.
#include <neuron.pb.h>
#include <wire.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const size_t chunk = 1 + data[0] % 64;
	data++;
	size--;
	neuron::wire::FrameDecoder decoder;
	size_t fed = 0;
	bool broken = false;
	while (fed < size && !broken) {
		const size_t n = std::min(chunk, size - fed);
		decoder.feed(data + fed, n);
		fed += n;
		for (;;) {
			std::string payload, error;
			auto st = decoder.next(&payload, &error);
			if (st == neuron::wire::FrameDecoder::Status::NeedMore)
				break;
			if (st == neuron::wire::FrameDecoder::Status::Error) {
				if (error.empty())
					std::abort(); // every error must say what was wrong
				broken = true;
				break;
			}
			if (payload.empty() || payload.size() > neuron::wire::kMaxFrame)
				std::abort();
			neuron::api::Request req;
			if (req.ParseFromString(payload)) {
				// A parsed request re-encodes into a frame that decodes to itself.
				neuron::wire::FrameDecoder again;
				const std::string frame = neuron::wire::encode_frame(req);
				again.feed(frame.data(), frame.size());
				std::string p2, e2;
				if (frame.size() - 4 <= neuron::wire::kMaxFrame && frame.size() > 4 &&
				    again.next(&p2, &e2) != neuron::wire::FrameDecoder::Status::Frame)
					std::abort();
			}
		}
	}
	return 0;
}
