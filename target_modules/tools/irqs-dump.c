// SPDX-License-Identifier: GPL-2.0
/*
 * irqs-dump: copy an irq-station record stream to a file, for running the
 * experiment by hand.
 *
 *   irqs-dump [-f v1|legacy] [-n records] [-t seconds] [-s] [-q] SOURCE [OUT]
 *
 * SOURCE is /dev/lpt_latency, /dev/pcie_latency, /dev/rtf<n> or a file
 * written earlier. OUT receives the bytes exactly as read ("-" or absent:
 * standard output; -q: nowhere). The copy stops after -n records, after -t
 * seconds, at end of file, or on SIGINT/SIGTERM. -s prints a summary on
 * standard error: records, losses from sequence gaps, the module's drop
 * counter, and min/mean/max latency of the IRQs that were ours.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../include/irqs_record.h"

#define BUF_BYTES	(IRQS_RECORD_SIZE * 1024)

struct summary {
	bool legacy;
	uint64_t records;	/* decoded */
	uint64_t lost;		/* missing sequence numbers */
	uint64_t gaps;		/* places where some were missing */
	uint64_t not_ours;
	uint64_t overrun;
	uint64_t bad;		/* wrong magic/version or seq backwards */
	uint32_t dropped;	/* module counter, last record */
	bool have_seq;
	uint64_t next_seq;
	uint64_t n_lat;
	int64_t lat_min, lat_max;
	double lat_sum;
};

/* Lock-free atomic: the one kind of object C lets a handler write. */
static atomic_bool stop;

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&stop, true);
}

static void print_usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-f v1|legacy] [-n records] [-t seconds] [-s] [-q] SOURCE [OUT|-]\n"
		"  SOURCE  /dev/lpt_latency, /dev/pcie_latency, /dev/rtf<n> or a dump file\n"
		"  OUT     file for the raw stream (default: standard output)\n"
		"  -f      record format the module was loaded with (default v1)\n"
		"  -n      stop after this many records\n"
		"  -t      stop after this many seconds\n"
		"  -s      print a decoded summary on standard error\n"
		"  -q      do not write the stream anywhere (with -s: summary only)\n",
		prog);
}

static void add_latency(struct summary *s, int64_t lat)
{
	if (!s->n_lat || lat < s->lat_min)
		s->lat_min = lat;
	if (!s->n_lat || lat > s->lat_max)
		s->lat_max = lat;
	s->lat_sum += lat;
	s->n_lat++;
}

static void decode_v1(struct summary *s, const unsigned char *p)
{
	struct irqs_record_v1 r;

	memcpy(&r, p, sizeof(r));	/* the buffer may be unaligned */
	s->records++;
	if (r.magic != IRQS_RECORD_MAGIC || r.version != IRQS_RECORD_VERSION) {
		s->bad++;
		return;
	}
	if (s->have_seq && r.seq < s->next_seq) {
		s->bad++;	/* stream restarted or reordered */
	} else if (s->have_seq && r.seq > s->next_seq) {
		s->lost += r.seq - s->next_seq;
		s->gaps++;
	}
	s->have_seq = true;
	s->next_seq = r.seq + 1;
	s->dropped = r.dropped;
	if (r.flags & IRQS_F_OVERRUN)
		s->overrun++;
	if (r.flags & IRQS_F_NOT_OURS)
		s->not_ours++;
	else
		add_latency(s, r.latency_ns);
}

static void decode_legacy(struct summary *s, const unsigned char *p)
{
	int64_t lat;

	memcpy(&lat, p, sizeof(lat));
	s->records++;
	add_latency(s, lat);
}

static void print_summary(const struct summary *s, size_t pending)
{
	fprintf(stderr, "records: %" PRIu64 "\n", s->records);
	if (!s->legacy) {
		fprintf(stderr, "lost (seq gaps): %" PRIu64 " in %" PRIu64 " gaps\n",
			s->lost, s->gaps);
		fprintf(stderr, "dropped by module: %" PRIu32 "\n", s->dropped);
		fprintf(stderr, "not ours: %" PRIu64 "\n", s->not_ours);
		fprintf(stderr, "overrun: %" PRIu64 "\n", s->overrun);
		fprintf(stderr, "bad records: %" PRIu64 "\n", s->bad);
	}
	if (s->n_lat)
		fprintf(stderr,
			"latency ns: min %" PRId64 " mean %.1f max %" PRId64 "\n",
			s->lat_min, s->lat_sum / s->n_lat, s->lat_max);
	else
		fprintf(stderr, "latency ns: no samples\n");
	if (pending)
		fprintf(stderr, "trailing partial record: %zu bytes\n", pending);
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static unsigned char buf[BUF_BYTES + IRQS_RECORD_SIZE];
	struct summary sum = { 0 };
	struct sigaction sa;
	uint64_t max_records = 0;
	double seconds = 0, deadline = 0;
	bool want_summary = false, quiet = false;
	size_t rsz, held = 0;
	int in, out = -1, opt, ret = 0;

	while ((opt = getopt(argc, argv, "f:n:t:sqh")) != -1) {
		switch (opt) {
		case 'f':
			if (!strcmp(optarg, "legacy")) {
				sum.legacy = true;
			} else if (strcmp(optarg, "v1")) {
				fprintf(stderr, "unknown format '%s' (v1 or legacy)\n",
					optarg);
				return 2;
			}
			break;
		case 'n':
			max_records = strtoull(optarg, NULL, 0);
			break;
		case 't':
			seconds = strtod(optarg, NULL);
			break;
		case 's':
			want_summary = true;
			break;
		case 'q':
			quiet = true;
			break;
		default:
			print_usage(argv[0]);
			return opt == 'h' ? 0 : 2;
		}
	}
	if (optind >= argc || argc - optind > 2) {
		print_usage(argv[0]);
		return 2;
	}
	rsz = sum.legacy ? sizeof(int64_t) : sizeof(struct irqs_record_v1);

	in = open(argv[optind], O_RDONLY);
	if (in < 0) {
		fprintf(stderr, "%s: %s\n", argv[optind], strerror(errno));
		return 1;
	}
	if (!quiet) {
		const char *path = argc - optind == 2 ? argv[optind + 1] : "-";

		out = strcmp(path, "-") ? open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644)
					: STDOUT_FILENO;
		if (out < 0) {
			fprintf(stderr, "%s: %s\n", path, strerror(errno));
			close(in);
			return 1;
		}
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;	/* no SA_RESTART: read() returns EINTR */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (seconds > 0)
		deadline = now_s() + seconds;

	while (!atomic_load(&stop)) {
		size_t want = BUF_BYTES, off;
		ssize_t n;

		if (deadline) {
			struct pollfd pfd = { .fd = in, .events = POLLIN };
			double left = deadline - now_s();

			if (left <= 0)
				break;
			if (poll(&pfd, 1, (int)(left * 1000) + 1) == 0)
				continue;
		}
		if (max_records) {
			uint64_t left = max_records - sum.records;

			if (!left)
				break;
			if (left * rsz < want)
				want = left * rsz - held;
		}
		n = read(in, buf + held, want);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "read %s: %s\n", argv[optind], strerror(errno));
			ret = 1;
			break;
		}
		if (n == 0)
			break;	/* end of a dump file */
		if (out >= 0 && write_all(out, buf + held, (size_t)n)) {
			fprintf(stderr, "write: %s\n", strerror(errno));
			ret = 1;
			break;
		}
		held += (size_t)n;
		for (off = 0; off + rsz <= held; off += rsz) {
			if (sum.legacy)
				decode_legacy(&sum, buf + off);
			else
				decode_v1(&sum, buf + off);
		}
		memmove(buf, buf + off, held - off);
		held -= off;
	}

	if (want_summary)
		print_summary(&sum, held);
	if (out >= 0 && out != STDOUT_FILENO && close(out)) {
		fprintf(stderr, "close: %s\n", strerror(errno));
		ret = 1;
	}
	close(in);
	return ret;
}
