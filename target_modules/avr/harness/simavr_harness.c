// SPDX-License-Identifier: GPL-2.0
/*
 * simavr_harness.c - drive the responder firmware in simavr and log, cycle by
 * cycle, what a signal generator and a scope would see, plus what no scope
 * sees: when each interrupt handler ran.
 *
 * Usage: simavr_harness [options] firmware.elf
 *   -n N       stimuli: rising edges on the input pin (default 1000)
 *   -p CYCLES  least gap between two rising edges (default 2000)
 *   -j CYCLES  jitter: each gap is period + uniform[0, jitter) (default 2000)
 *   -w CYCLES  pulse width, < period (default 100)
 *   -s SEED    PRNG seed, 64-bit (default 1)
 *   -d CYCLES  start-up delay before the first edge (default 20000)
 *   -t CYCLES  tail run after the last edge (default 20000)
 *   -m MCU     simavr core name (default atmega328p)
 *   -f HZ      CPU clock (default 16000000)
 *   -i PN      input pin, port letter and bit (default D2: INT0, Uno pin 2)
 *   -o PN      output pin (default D7: Uno pin 7)
 *   -v VECTOR  log this interrupt vector's handler runs; repeatable
 *              (default: 1 = INT0 and 16 = TIMER0_OVF, the ATmega328P's)
 *
 * The jitter must span well over a cycle or two: a gap of exactly the period
 * would sample timer0's 16384-cycle overflow at a few fixed phases and could
 * miss (or always hit) its handler. With jitter >= period the edges' phase
 * against timer0 is uniform after a few edges.
 *
 * Output (stdout), format version 1: one event per line, space-separated,
 * cycles are unsigned decimal counts of CPU cycles since reset:
 *
 *   avrsim 1                                    first line: format and version
 *   config key=value ...                        second line: mcu, freq (Hz),
 *                                               stimuli, period, jitter, width,
 *                                               seed, input, output
 *   stim <cycle>                                a rising edge on the input
 *   resp <cycle> <level>                        the output changed to level 0|1
 *   isr <vector> <entry> <exit>                 one run of a logged handler
 *   end stims=<n> resps=<n> isrs=<n> cycles=<c> last line: counts, final cycle
 *
 * Lines appear in the order the events complete: `isr` when the handler has
 * returned, so an `isr` line may follow the `stim`/`resp` lines it overlaps.
 * Timing conventions (simavr 1.6):
 *   stim  the edge's own cycle. simavr looks at the pin between instructions,
 *         as the AVR core samples its interrupt flags, so the wait for the
 *         current instruction to finish is part of the measured delay.
 *   resp  the cycle at which the instruction that wrote the port began.
 *   entry the cycle at which the CPU jumped to the vector (I flag cleared).
 *         simavr charges no cycles for the jump itself; a real AVR spends 4
 *         (push PC, clear I), so on hardware every delay is 4 cycles longer.
 *   exit  the cycle right after the handler's RETI completed.
 * Errors go to stderr with a non-zero exit status: 2 for bad usage, 1 for a
 * firmware or simulation failure. Without an `end` line the run is incomplete.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <avr_ioport.h>
#include <sim_avr.h>
#include <sim_elf.h>
#include <sim_interrupts.h>
#include <sim_irq.h>
#include <sim_cycle_timers.h>

#define FORMAT_VERSION 1
#define MAX_VECTORS 8

struct pin {
	char port;	/* 'A'.. */
	int bit;	/* 0..7 */
};

struct isr_log {
	unsigned vector;
	int running;
	avr_cycle_count_t entry;
	int exit_pending;	/* RETI seen; exit cycle known once it completes */
};

struct harness {
	avr_t *avr;
	/* stimulus */
	uint64_t n, period, jitter, width, delay, tail;
	uint64_t rng;
	uint64_t applied;	/* rising edges so far */
	int input_high;
	avr_cycle_count_t next_rise, last_rise;
	avr_irq_t *input_irq;
	/* observation */
	int output_level;
	uint64_t resps, isrs;
	struct isr_log isr[MAX_VECTORS];
	int n_isr;
};

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("simavr_harness: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static void usage(const char *why)
{
	fprintf(stderr, "simavr_harness: %s\n"
		"usage: simavr_harness [-n N] [-p CYCLES] [-j CYCLES] [-w CYCLES] [-s SEED]\n"
		"                      [-d CYCLES] [-t CYCLES] [-m MCU] [-f HZ] [-i PN] [-o PN]\n"
		"                      [-v VECTOR]... firmware.elf\n", why);
	exit(2);
}

/* simavr logs through this: keep stdout for our format alone */
static void log_to_stderr(avr_t *avr, const int level, const char *fmt, va_list ap)
{
	(void)avr;
	if (level <= LOG_WARNING)
		vfprintf(stderr, fmt, ap);
}

/* splitmix64: small, seedable, and every seed (0 too) gives a good stream */
static uint64_t next_random(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* uniform in [0, bound): multiply-shift, bias < bound / 2^64 (nothing here) */
static uint64_t uniform_below(uint64_t *state, uint64_t bound)
{
	if (bound == 0)
		return 0;
	return (uint64_t)(((unsigned __int128)next_random(state) * bound) >> 64);
}

static uint64_t parse_u64(const char *s, const char *what)
{
	char *end;
	unsigned long long v;

	errno = 0;
	if (*s == '-' || *s == '\0')
		usage(what);
	v = strtoull(s, &end, 10);
	if (errno || *end != '\0')
		usage(what);
	return v;
}

static struct pin parse_pin(const char *s, const char *what)
{
	struct pin p;

	if (strlen(s) != 2 || s[0] < 'A' || s[0] > 'L' || s[1] < '0' || s[1] > '7')
		usage(what);
	p.port = s[0];
	p.bit = s[1] - '0';
	return p;
}

/*
 * The generator: one cycle timer that alternately raises the input (and
 * schedules its fall) and lowers it (and schedules the next rise). Times are
 * absolute and computed from the schedule, never from where simavr happened
 * to notice them, so instruction lengths cannot bend the stimulus.
 */
static avr_cycle_count_t generator(avr_t *avr, avr_cycle_count_t when, void *param)
{
	struct harness *h = param;

	(void)avr;
	if (!h->input_high) {
		avr_raise_irq(h->input_irq, 1);
		h->input_high = 1;
		h->applied++;
		h->last_rise = when;
		printf("stim %" PRIu64 "\n", (uint64_t)when);
		h->next_rise = when + h->period + uniform_below(&h->rng, h->jitter);
		return when + h->width;
	}
	avr_raise_irq(h->input_irq, 0);
	h->input_high = 0;
	return h->applied < h->n ? h->next_rise : 0;
}

static void output_changed(avr_irq_t *irq, uint32_t value, void *param)
{
	struct harness *h = param;
	int level = value ? 1 : 0;

	(void)irq;
	if (level == h->output_level)
		return;	/* a port write that left this pin as it was */
	h->output_level = level;
	h->resps++;
	printf("resp %" PRIu64 " %d\n", (uint64_t)h->avr->cycle, level);
}

struct isr_param {
	struct harness *h;
	struct isr_log *log;
};

/*
 * AVR_INT_IRQ_RUNNING of one vector: 1 when the core jumps to it, 0 when the
 * handler's RETI executes. At that moment avr->cycle is still the RETI's
 * first cycle; the exit is taken after the instruction, in the run loop.
 */
static void isr_running(avr_irq_t *irq, uint32_t value, void *param)
{
	struct isr_param *ip = param;
	struct isr_log *log = ip->log;

	(void)irq;
	if (value) {
		if (log->running)
			die("vector %u entered again before its RETI (nested handler)", log->vector);
		log->running = 1;
		log->entry = ip->h->avr->cycle;
	} else if (log->running) {
		log->running = 0;
		log->exit_pending = 1;
	}
}

static void flush_exits(struct harness *h)
{
	for (int i = 0; i < h->n_isr; i++) {
		struct isr_log *log = &h->isr[i];

		if (!log->exit_pending)
			continue;
		log->exit_pending = 0;
		h->isrs++;
		printf("isr %u %" PRIu64 " %" PRIu64 "\n", log->vector,
		       (uint64_t)log->entry, (uint64_t)h->avr->cycle);
	}
}

int main(int argc, char **argv)
{
	struct harness h = {
		.n = 1000, .period = 2000, .jitter = 2000, .width = 100,
		.delay = 20000, .tail = 20000, .rng = 1,
	};
	const char *mcu = "atmega328p";
	uint64_t freq = 16000000, seed = 1;
	struct pin in = { 'D', 2 }, out = { 'D', 7 };
	unsigned vectors[MAX_VECTORS];
	int n_vectors = 0;
	struct isr_param params[MAX_VECTORS];
	elf_firmware_t fw;
	int opt;

	while ((opt = getopt(argc, argv, "n:p:j:w:s:d:t:m:f:i:o:v:")) != -1) {
		switch (opt) {
		case 'n': h.n = parse_u64(optarg, "bad -n"); break;
		case 'p': h.period = parse_u64(optarg, "bad -p"); break;
		case 'j': h.jitter = parse_u64(optarg, "bad -j"); break;
		case 'w': h.width = parse_u64(optarg, "bad -w"); break;
		case 's': seed = parse_u64(optarg, "bad -s"); break;
		case 'd': h.delay = parse_u64(optarg, "bad -d"); break;
		case 't': h.tail = parse_u64(optarg, "bad -t"); break;
		case 'm': mcu = optarg; break;
		case 'f': freq = parse_u64(optarg, "bad -f"); break;
		case 'i': in = parse_pin(optarg, "bad -i (want e.g. D2)"); break;
		case 'o': out = parse_pin(optarg, "bad -o (want e.g. D7)"); break;
		case 'v': {
			uint64_t v = parse_u64(optarg, "bad -v");

			if (v == 0 || v > 63)
				usage("-v: vector 1..63 (0 is reset)");
			if (n_vectors == MAX_VECTORS)
				usage("-v: too many vectors");
			vectors[n_vectors++] = (unsigned)v;
			break;
		}
		default: usage("unknown option");
		}
	}
	if (optind != argc - 1)
		usage("one firmware ELF expected");
	if (h.n == 0)
		usage("-n must be at least 1");
	if (h.width == 0 || h.width >= h.period)
		usage("need 0 < width < period");
	if (h.delay == 0)
		usage("-d must be at least 1");
	if (freq == 0 || freq > UINT32_MAX)
		usage("-f out of range");
	if (n_vectors == 0) {
		vectors[n_vectors++] = 1;	/* INT0_vect_num on the ATmega328P */
		vectors[n_vectors++] = 16;	/* TIMER0_OVF_vect_num */
	}
	h.rng = seed;

	avr_global_logger_set(log_to_stderr);
	memset(&fw, 0, sizeof(fw));
	if (elf_read_firmware(argv[optind], &fw) != 0)
		die("cannot read firmware ELF %s", argv[optind]);
	h.avr = avr_make_mcu_by_name(mcu);
	if (!h.avr)
		die("simavr has no core named %s", mcu);
	if (avr_init(h.avr) != 0)
		die("cannot initialise the %s core", mcu);
	/* the ELF carries no .mmcu section: the clock is ours to set */
	fw.frequency = (uint32_t)freq;
	avr_load_firmware(h.avr, &fw);
	h.avr->frequency = (uint32_t)freq;

	h.input_irq = avr_io_getirq(h.avr, AVR_IOCTL_IOPORT_GETIRQ(in.port), in.bit);
	avr_irq_t *out_irq = avr_io_getirq(h.avr, AVR_IOCTL_IOPORT_GETIRQ(out.port), out.bit);

	if (!h.input_irq || !out_irq)
		die("%s has no port %c", mcu, !h.input_irq ? in.port : out.port);
	avr_irq_register_notify(out_irq, output_changed, &h);
	for (int i = 0; i < n_vectors; i++) {
		avr_irq_t *irqs = avr_get_interrupt_irq(h.avr, (uint8_t)vectors[i]);

		if (!irqs)
			die("%s has no interrupt vector %u", mcu, vectors[i]);
		h.isr[i].vector = vectors[i];
		params[i].h = &h;
		params[i].log = &h.isr[i];
		avr_irq_register_notify(irqs + AVR_INT_IRQ_RUNNING, isr_running, &params[i]);
	}
	h.n_isr = n_vectors;

	printf("avrsim %d\n", FORMAT_VERSION);
	printf("config mcu=%s freq=%" PRIu64 " stimuli=%" PRIu64 " period=%" PRIu64
	       " jitter=%" PRIu64 " width=%" PRIu64 " seed=%" PRIu64 " input=%c%d output=%c%d\n",
	       mcu, freq, h.n, h.period, h.jitter, h.width, seed, in.port, in.bit, out.port, out.bit);

	avr_cycle_timer_register(h.avr, h.delay, generator, &h);

	/* upper bound on the run: every gap at its longest, plus slack */
	uint64_t limit = h.delay + h.n * (h.period + h.jitter) + h.tail + 1000;

	for (;;) {
		int state = avr_run(h.avr);

		flush_exits(&h);
		if (state == cpu_Done || state == cpu_Crashed)
			die("firmware stopped (%s) at cycle %" PRIu64 ", pc 0x%04x",
			    state == cpu_Done ? "done: sleeping with interrupts off?" : "crashed",
			    (uint64_t)h.avr->cycle, (unsigned)h.avr->pc);
		if (h.applied == h.n && !h.input_high && h.avr->cycle >= h.last_rise + h.tail)
			break;
		if (h.avr->cycle > limit)
			die("run passed cycle %" PRIu64 " with %" PRIu64 " of %" PRIu64 " stimuli applied",
			    limit, h.applied, h.n);
	}
	printf("end stims=%" PRIu64 " resps=%" PRIu64 " isrs=%" PRIu64 " cycles=%" PRIu64 "\n",
	       h.applied, h.resps, h.isrs, (uint64_t)h.avr->cycle);
	if (fflush(stdout) != 0 || ferror(stdout))
		die("writing stdout: %s", strerror(errno));
	avr_terminate(h.avr);
	return 0;
}
