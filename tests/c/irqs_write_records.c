// SPDX-License-Identifier: GPL-2.0
/*
 * Test writer for the record stream, compiled from the one definition in
 * target_modules/include/irqs_record.h.
 *
 *   irqs_write_records v1 OUT N GAP_AT GAP_LEN
 *   irqs_write_records legacy OUT N
 *
 * Writes N records to OUT the way the kernel modules do (struct assignment,
 * little-endian host) and prints every field as text on standard output, one
 * record per line, so that a decoder can be checked field by field against
 * values that never went through the binary layout. In v1, GAP_LEN sequence
 * numbers starting at GAP_AT are skipped, as if the ring had been full, and
 * the drop counter counts them from then on.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../target_modules/include/irqs_record.h"

/* Deterministic values that exercise every byte and the sign of latency. */
static uint64_t lcg(uint64_t *state)
{
	*state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
	return *state >> 11;
}

static int write_v1(FILE *out, unsigned long n, unsigned long gap_at,
		    unsigned long gap_len)
{
	uint64_t state = 42, seq = 0;
	uint32_t dropped = 0;
	unsigned long i;

	for (i = 0; i < n; i++, seq++) {
		struct irqs_record_v1 r;
		uint64_t x = lcg(&state);

		if (seq == gap_at) {
			seq += gap_len;
			dropped += (uint32_t)gap_len;
		}
		memset(&r, 0, sizeof(r));
		r.magic = IRQS_RECORD_MAGIC;
		r.version = IRQS_RECORD_VERSION;
		r.flags = (uint16_t)((((i & 1) ? IRQS_IFACE_PCIE : IRQS_IFACE_LPT)
				      << IRQS_F_IFACE_SHIFT) |
				     ((i % 3) ? IRQS_F_CHECK : 0) |
				     ((i % 7) == 0 ? IRQS_F_NOT_OURS : 0) |
				     ((i % 5) == 0 ? IRQS_F_HW_WIDTH : 0) |
				     ((i % 11) == 0 ? IRQS_F_OVERRUN : 0));
		r.seq = seq;
		r.t_write_ns = 1700000000000000000ULL + seq * 100000ULL +
			       (x & 0xff);
		r.latency_ns = (int64_t)(x % 2000000) - 1000;	/* some < 0 */
		if (i == 3)
			r.latency_ns = INT64_MIN;
		if (i == 4)
			r.latency_ns = INT64_MAX;
		r.hw_width_ns = (r.flags & IRQS_F_HW_WIDTH) ?
				(uint32_t)(x >> 20) : 0;
		r.dropped = dropped;
		if (fwrite(&r, sizeof(r), 1, out) != 1)
			return -1;
		printf("%" PRIu32 " %" PRIu16 " %" PRIu16 " %" PRIu64 " %" PRIu64
		       " %" PRId64 " %" PRIu32 " %" PRIu32 "\n",
		       r.magic, r.version, r.flags, r.seq, r.t_write_ns,
		       r.latency_ns, r.hw_width_ns, r.dropped);
	}
	return 0;
}

static int write_legacy(FILE *out, unsigned long n)
{
	uint64_t state = 7;
	unsigned long i;

	for (i = 0; i < n; i++) {
		int64_t lat = (int64_t)(lcg(&state) % 20000000) - 10000;

		if (i == 1)
			lat = INT64_MIN;
		if (i == 2)
			lat = INT64_MAX;
		if (fwrite(&lat, sizeof(lat), 1, out) != 1)
			return -1;
		printf("%" PRId64 "\n", lat);
	}
	return 0;
}

int main(int argc, char **argv)
{
	FILE *out;
	int ret;

	if (argc < 4 || (strcmp(argv[1], "v1") && strcmp(argv[1], "legacy")) ||
	    (!strcmp(argv[1], "v1") && argc != 6)) {
		fprintf(stderr,
			"%s v1 OUT N GAP_AT GAP_LEN | %s legacy OUT N\n",
			argv[0], argv[0]);
		return 2;
	}
	out = fopen(argv[2], "wb");
	if (!out) {
		perror(argv[2]);
		return 1;
	}
	if (!strcmp(argv[1], "v1"))
		ret = write_v1(out, strtoul(argv[3], NULL, 0),
			       strtoul(argv[4], NULL, 0),
			       strtoul(argv[5], NULL, 0));
	else
		ret = write_legacy(out, strtoul(argv[3], NULL, 0));
	if (fclose(out) || ret) {
		perror(argv[2]);
		return 1;
	}
	return 0;
}
