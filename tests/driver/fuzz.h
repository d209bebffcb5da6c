/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * neuron_fuzz: the ioctl fuzzer of neuron.ko, run in the QEMU suite's first
 * boot. Worker processes call every driver ioctl and the DRM core's GEM,
 * PRIME and syncobj ioctls with random and boundary arguments, next to a
 * worker whose DMA and compute jobs are checked, an engine that is killed
 * and restarted, and an unprivileged worker. See fuzz_main.c.
 */
#ifndef FUZZ_H
#define FUZZ_H

#include <stdatomic.h>

#include "nt.h"

#define FUZZ_THREADS	2	/* calling threads per fuzz worker */
#define FUZZ_MAX_FILES	4	/* device files per fuzz worker: one per thread, */
#define FUZZ_CHURN	3	/* and this one, closed and dup2'ed under them */
#define FUZZ_POOL	32	/* handles remembered per file */
#define FUZZ_TRACE	16	/* last calls remembered per worker */

/* A reproducible random stream (xorshift64*). */
struct fuzz_rng {
	uint64_t s;
};

uint64_t fuzz_next(struct fuzz_rng *r);
uint32_t fuzz_below(struct fuzz_rng *r, uint32_t n);	/* [0, n) */
int fuzz_chance(struct fuzz_rng *r, uint32_t one_in);	/* 1 in n */
/* Sizes, offsets, counts: boundaries (0, 1, pages, 2^k +- 1, U64_MAX - k). */
uint64_t fuzz_u64(struct fuzz_rng *r);
uint32_t fuzz_u32(struct fuzz_rng *r);
/* A small size, mostly valid for a BO of @max bytes. */
uint64_t fuzz_size(struct fuzz_rng *r, uint64_t max);

/*
 * User pointers: NULL, unmapped, kernel, read-only, straddling a guard page
 * (the struct's tail faults), or a valid scratch buffer of random bytes.
 */
void fuzz_pointers_init(void);
uint64_t fuzz_ptr(struct fuzz_rng *r, size_t len);
void *fuzz_scratch(struct fuzz_rng *r, size_t len);	/* valid, random bytes */

/* Counters shared by all worker processes (MAP_SHARED). */
struct fuzz_stats {
	atomic_ullong calls;
	atomic_ullong errors;
	atomic_ullong by_errno[134];
	atomic_ullong violations;	/* a call that must fail succeeded */
	atomic_ullong dma_checked, compute_checked, valid_tolerated;
	atomic_ullong mismatches;	/* a valid job's data was wrong */
	atomic_ullong engine_restarts;
	/* What each worker did last, for a crash report. */
	char trace[16][FUZZ_TRACE][48];
	atomic_uint trace_pos[16];
};

extern struct fuzz_stats *fuzz_stats;

/* A fuzz worker's state: its files and what it made in them. */
struct fuzz_file {
	int fd;		/* -1: closed */
	int minor;
	uint32_t bos[FUZZ_POOL], syncobjs[FUZZ_POOL];
	uint64_t bo_size[FUZZ_POOL];
	uint64_t job_ids[8];	/* fetched, when this file is an engine */
};

struct fuzz_worker {
	int id;
	struct fuzz_file files[FUZZ_MAX_FILES];
	int privileged;		/* 0: must never pass a root-only check */
	int devnull;
};

/*
 * One calling thread: its own random stream, and its own file, the only one
 * it reopens, maps and touches (others may close or replace the rest).
 */
struct fuzz_thread {
	struct fuzz_worker *w;
	struct fuzz_rng rng;
	int slot;
};

/* One ioctl call counted (ret: the ioctl's return, errno as it left it). */
int fuzz_count(struct fuzz_worker *w, const char *what, int ret);
void fuzz_trace(struct fuzz_worker *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* fuzz_ops.c: one random call; a file of accel<minor> for a worker. */
void fuzz_one(struct fuzz_thread *t);
void fuzz_file_open(struct fuzz_worker *w, struct fuzz_file *f, int minor);

/* fuzz_valid.c: DMA and compute jobs whose data is checked. */
void fuzz_valid_worker(int minor, uint64_t deadline_ns);

#endif
