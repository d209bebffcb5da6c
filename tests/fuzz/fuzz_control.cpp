// libFuzzer target: the control-plane decoder neurond runs on every byte a client
// sends (frame splitting, then protobuf parsing of the Request). The input is cut
// into reads of fuzzer-chosen sizes, as a socket would deliver it, and some reads
// carry a descriptor (SCM_RIGHTS): each must end up with exactly one frame or be
// closed by the decoder when the stream breaks, never leak or go to two frames.
#include <neuron.pb.h>
#include <wire.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <vector>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const size_t chunk = 1 + data[0] % 64;
	data++;
	size--;
	const bool with_fds = data[-1] & 0x80;
	std::vector<int> opened; // every descriptor handed to the decoder
	{
	neuron::wire::FrameDecoder decoder;
	size_t fed = 0;
	bool broken = false;
	while (fed < size && !broken) {
		const size_t n = std::min(chunk, size - fed);
		std::vector<int> fds;
		if (with_fds && (data[fed] & 1)) {
			fds.push_back(open("/dev/null", O_RDONLY | O_CLOEXEC));
			opened.push_back(fds.back());
		}
		decoder.feed(data + fed, n, std::move(fds));
		fed += n;
		for (;;) {
			std::string payload, error;
			std::vector<int> got;
			auto st = decoder.next(&payload, &error, &got);
			for (int fd : got)
				close(fd);
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
	} // the decoder closes what it still holds (incomplete frames, a broken stream)
	for (int fd : opened)
		if (fcntl(fd, F_GETFD) != -1)
			std::abort(); // leaked: neither handed out with a frame nor closed
	return 0;
}
