// A benchmark's libneuron calls must all succeed: a failed one ends the program
// with the call and libneuron's reason (a figure from a half-failed run is worse
// than none). Each program defines BENCH_NAME before including this.
#pragma once

#include <neuron/neuron.h>

#include <cstdio>
#include <cstdlib>

#ifndef BENCH_NAME
#error "define BENCH_NAME (the program's name, for its error messages) before including neuron_check.h"
#endif

#define CHECK(call)                                                                                   \
	do {                                                                                          \
		neuron_status s_ = (call);                                                            \
		if (s_ != NEURON_OK) {                                                                \
			std::fprintf(stderr, BENCH_NAME ": %s failed: %s\n", #call, neuron_last_error());  \
			std::exit(1);                                                                 \
		}                                                                                     \
	} while (0)
