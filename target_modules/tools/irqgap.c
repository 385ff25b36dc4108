// SPDX-License-Identifier: GPL-2.0
/*
 * irqgap: spin on one CPU reading a clock and report every moment the loop
 * lost the CPU for longer than a threshold, with what happened meanwhile:
 * context switches of the thread, this CPU's interrupt and softirq counts,
 * and the SMI counter (MSR 0x34).
 *
 *   irqgap --cpu N --threshold-ns T [--duration-s S] [--priority P]
 *          [--clock auto|tsc|cntvct|monotonic] [--no-mlock] [--no-counts]
 *          [--flush-ms M] [--msr-dev PATH] [--no-smi]
 *          [--interrupts-file PATH] [--softirqs-file PATH]
 *
 * The loop's clock is a raw counter where user space can read one (x86's
 * invariant TSC; arm64's generic timer, its virtual count CNTVCT_EL0), its
 * rate calibrated against CLOCK_MONOTONIC_RAW; else CLOCK_MONOTONIC.
 *
 * Output (stdout) is line based text, format version 1; see the station's
 * parser, station/parsers/irqgap.py. Everything the loop writes is kept in
 * memory and written in bookkeeping windows, which are not counted as gaps:
 * their total is reported as blind time, and a window that itself lasted
 * longer than the threshold (the CPU taken meanwhile) as a "blind" line.
 *
 * Exit status: 0 done (duration or signal), 2 bad option or setup failure,
 * 3 stdout could not be written (the reader went away).
 */
#define _GNU_SOURCE

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* the raw counter of this architecture, if any: "tsc" (x86) or "cntvct" (arm64) */
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_COUNTER	1
#define COUNTER_NAME	"tsc"
#define HAVE_SMI	1
#elif defined(__aarch64__)
#define HAVE_COUNTER	1
#define COUNTER_NAME	"cntvct"
#define HAVE_SMI	0
#else
#define HAVE_COUNTER	0
#define COUNTER_NAME	"none"
#define HAVE_SMI	0
#endif

/* the architecture, as uname -m names it: the station words what it cannot explain by it */
#if defined(__x86_64__)
#define ARCH_NAME	"x86_64"
#elif defined(__i386__)
#define ARCH_NAME	"i686"
#elif defined(__aarch64__)
#define ARCH_NAME	"aarch64"
#else
#define ARCH_NAME	"unknown"
#endif

#define FORMAT_VERSION	1
#define NSEC_PER_SEC	1000000000ULL
#define OUT_CAP		(1024 * 1024)
#define OUT_FLUSH_AT	(64 * 1024)	/* write out once this much is pending */
#define PROC_MIN_CAP	(256 * 1024)
#define LABEL_MAX	48
#define MIN_ROWS	1024
#define MSR_SMI_COUNT	0x34

#define unlikely(x)	__builtin_expect(!!(x), 0)

enum clock_kind { CLOCK_AUTO, CLOCK_COUNTER, CLOCK_MONO };

struct opts {
	int cpu;
	uint64_t threshold_ns;
	uint64_t duration_s;
	int priority;
	enum clock_kind clock;
	bool mlock;
	bool counts;
	bool smi;
	uint64_t flush_ms;
	const char *msr_dev;
	const char *interrupts;
	const char *softirqs;
};

struct out {
	char *buf;
	size_t len;
};

/* One row of a /proc counts file, known by its label ("0", "LOC", "TIMER"). */
struct row {
	char label[LABEL_MAX];
	uint64_t last;		/* count at the previous snapshot */
	uint64_t desc_hash;	/* tells a freed and reused IRQ number */
	unsigned int seen_gen;	/* snapshot generation it was last seen in */
	bool retired;		/* label now belongs to a newer row */
};

/* /proc/interrupts or /proc/softirqs: opened once, re-read with pread. */
struct counts {
	const char *path;
	const char *kind;	/* keyword of the declaration lines */
	bool with_desc;
	int fd;
	char *buf;
	size_t cap;
	struct row *rows;
	int nrows, maxrows;
	int hint;		/* rows come in file order: try this one first */
	unsigned int gen;
	int *moved;		/* rows that moved in the last snapshot ... */
	uint64_t *delta;	/* ... and by how much */
	int nmoved;
};

struct state {
	struct opts o;
	struct out out;
	bool tsc;
	double tsc_hz;
	double ns_per_tick;
	uint64_t thr_ticks;
	uint64_t flush_ticks;
	uint64_t deadline;	/* in loop ticks; UINT64_MAX: none */
	uint64_t flush_at;
	uint64_t iterations;
	uint64_t gaps;
	uint64_t blind_ticks;
	uint64_t watched_until;	/* the loop's last read, ticks */
	uint64_t last_ctxsw;
	int msr_fd;		/* -1: SMI count unavailable */
	uint64_t last_smi;
	struct counts irqs, softirqs;
};

/* set by the signal handler: a lock-free atomic is safe to touch there */
static atomic_int stop;

static void on_signal(int sig)
{
	(void)sig;
	atomic_store_explicit(&stop, 1, memory_order_relaxed);
}

static void print_usage(FILE *f)
{
	fprintf(f,
		"usage: irqgap --cpu N --threshold-ns T [--duration-s S] [--priority P]\n"
		"              [--clock auto|tsc|cntvct|monotonic] [--no-mlock] [--no-counts]\n"
		"              [--flush-ms M] [--msr-dev PATH] [--no-smi]\n"
		"              [--interrupts-file PATH] [--softirqs-file PATH]\n"
		"  --cpu N           CPU to pin the loop to (required)\n"
		"  --threshold-ns T  shortest gap reported, in ns (required)\n"
		"  --duration-s S    stop after S seconds (0, default: at SIGTERM/SIGINT)\n"
		"  --priority P      SCHED_FIFO priority (default 99; 0: SCHED_OTHER)\n"
		"  --clock C         loop clock (default auto: x86's tsc if invariant,\n"
		"                    arm64's cntvct; else monotonic)\n"
		"  --no-mlock        do not lock memory\n"
		"  --no-counts       do not read /proc/interrupts and /proc/softirqs\n"
		"  --flush-ms M      write output and a tick line every M ms (default 1000)\n"
		"  --msr-dev PATH    MSR device for the SMI count (default /dev/cpu/N/msr)\n"
		"  --no-smi          do not read the SMI count\n"
		"  --interrupts-file PATH, --softirqs-file PATH\n"
		"                    read these instead of /proc/interrupts, /proc/softirqs\n");
}

static _Noreturn void die(const char *fmt, ...)
{
	va_list ap;

	fputs("irqgap: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void bad_value(const char *opt, const char *val, const char *want)
{
	fprintf(stderr, "irqgap: --%s: invalid value '%s' (%s)\n", opt, val, want);
	print_usage(stderr);
	exit(2);
}

/* Plain decimal only: strtoull alone takes "-1", " 5" and "+5". */
static uint64_t parse_u64(const char *opt, const char *s, uint64_t min,
			  uint64_t max, const char *want)
{
	unsigned long long v;
	char *end;

	if (!isdigit((unsigned char)s[0]))
		bad_value(opt, s, want);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		bad_value(opt, s, want);
	return v;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum { O_CPU = 256, O_THR, O_DUR, O_PRIO, O_CLOCK, O_NOMLOCK,
	       O_NOCOUNTS, O_FLUSH, O_MSR, O_NOSMI, O_IRQFILE, O_SOFTFILE, O_HELP };
	static const struct option longopts[] = {
		{ "cpu", required_argument, NULL, O_CPU },
		{ "threshold-ns", required_argument, NULL, O_THR },
		{ "duration-s", required_argument, NULL, O_DUR },
		{ "priority", required_argument, NULL, O_PRIO },
		{ "clock", required_argument, NULL, O_CLOCK },
		{ "no-mlock", no_argument, NULL, O_NOMLOCK },
		{ "no-counts", no_argument, NULL, O_NOCOUNTS },
		{ "flush-ms", required_argument, NULL, O_FLUSH },
		{ "msr-dev", required_argument, NULL, O_MSR },
		{ "no-smi", no_argument, NULL, O_NOSMI },
		{ "interrupts-file", required_argument, NULL, O_IRQFILE },
		{ "softirqs-file", required_argument, NULL, O_SOFTFILE },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	bool have_thr = false;
	int c;

	*o = (struct opts){ .cpu = -1, .priority = 99, .clock = CLOCK_AUTO,
			    .mlock = true, .counts = true, .smi = true,
			    .flush_ms = 1000,
			    .interrupts = "/proc/interrupts",
			    .softirqs = "/proc/softirqs" };
	/* getopt's own messages name the option: keep them */
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case O_CPU:
			o->cpu = (int)parse_u64("cpu", optarg, 0,
						CPU_SETSIZE - 1, "a CPU number");
			break;
		case O_THR:
			o->threshold_ns = parse_u64("threshold-ns", optarg, 1,
						    1000000000000ULL,
						    "1 ns to 1000 s");
			have_thr = true;
			break;
		case O_DUR:
			o->duration_s = parse_u64("duration-s", optarg, 0,
						  100000000ULL,
						  "seconds, 0: until a signal");
			break;
		case O_PRIO:
			o->priority = (int)parse_u64("priority", optarg, 0, 99,
						"0 to 99");
			break;
		case O_CLOCK:
			if (!strcmp(optarg, "auto"))
				o->clock = CLOCK_AUTO;
			else if (!strcmp(optarg, "tsc") ||
				 !strcmp(optarg, "cntvct")) {
				if (strcmp(optarg, COUNTER_NAME))
					die("--clock %s: this architecture's counter is %s (use auto or monotonic)",
					    optarg, COUNTER_NAME);
				o->clock = CLOCK_COUNTER;
			} else if (!strcmp(optarg, "monotonic"))
				o->clock = CLOCK_MONO;
			else
				bad_value("clock", optarg,
					  "auto, tsc, cntvct or monotonic");
			break;
		case O_NOMLOCK:
			o->mlock = false;
			break;
		case O_NOCOUNTS:
			o->counts = false;
			break;
		case O_FLUSH:
			o->flush_ms = parse_u64("flush-ms", optarg, 1,
						86400000ULL,
						"1 ms to 1 day");
			break;
		case O_MSR:
			o->msr_dev = optarg;
			break;
		case O_NOSMI:
			o->smi = false;
			break;
		case O_IRQFILE:	/* a copy with a known content: for tests */
			o->interrupts = optarg;
			break;
		case O_SOFTFILE:
			o->softirqs = optarg;
			break;
		case O_HELP:
			print_usage(stdout);
			exit(0);
		default:
			print_usage(stderr);
			exit(2);
		}
	}
	if (optind < argc) {
		fprintf(stderr, "irqgap: unexpected argument '%s'\n",
			argv[optind]);
		print_usage(stderr);
		exit(2);
	}
	if (o->cpu < 0 || !have_thr) {
		fprintf(stderr, "irqgap: --%s is required\n",
			o->cpu < 0 ? "cpu" : "threshold-ns");
		print_usage(stderr);
		exit(2);
	}
}

/* ---- clocks ---------------------------------------------------------- */

static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

/* the raw counter; the isb keeps arm64's read from being done early, out of order */
static inline uint64_t read_counter(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __rdtsc();
#elif defined(__aarch64__)
	uint64_t v;

	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
#else
	return 0;
#endif
}

#if defined(__aarch64__)
/* the generic timer's frequency, as the firmware set it (the counter's nominal rate) */
static uint64_t counter_frequency(void)
{
	uint64_t v;

	__asm__ volatile("mrs %0, cntfrq_el0" : "=r"(v));
	return v;
}
#endif

static inline uint64_t now_ticks(bool tsc)
{
	if (HAVE_COUNTER && tsc)
		return read_counter();
	return clock_ns(CLOCK_MONOTONIC);
}

/*
 * Whether the counter measures time: x86's TSC only when invariant (same rate
 * in every P- and C-state); arm64's generic timer always (its rate is fixed
 * by the architecture, and Linux lets user space read the virtual count).
 */
static bool tsc_invariant(void)
{
	bool constant = false, nonstop = false;
	char line[8192];
	FILE *f;

	if (!HAVE_COUNTER)
		return false;
	if (strcmp(COUNTER_NAME, "tsc"))
		return true;
	f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *tok, *save;

		if (strncmp(line, "flags", 5))
			continue;
		for (tok = strtok_r(line, " \t\n", &save); tok;
		     tok = strtok_r(NULL, " \t\n", &save)) {
			constant |= !strcmp(tok, "constant_tsc");
			nonstop |= !strcmp(tok, "nonstop_tsc");
		}
		break;
	}
	fclose(f);
	return constant && nonstop;
}

#if HAVE_COUNTER
/*
 * A counter reading and the raw clock at that instant: the tightest of a few
 * brackets, so a preemption between the reads does not skew it.
 */
static void tsc_raw_pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 7; i++) {
		uint64_t a = clock_ns(CLOCK_MONOTONIC_RAW);
		uint64_t t = read_counter();
		uint64_t b = clock_ns(CLOCK_MONOTONIC_RAW);

		if (b - a < best) {
			best = b - a;
			*tsc = t;
			*ns = a + (b - a) / 2;
		}
	}
}

/* CLOCK_MONOTONIC_RAW is not slewed by NTP: the TSC is compared with it. */
static double tsc_calibrate(unsigned int ms)
{
	uint64_t t0, n0, t1, n1;
	struct timespec until;

	tsc_raw_pair(&t0, &n0);
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long)ms * 1000000L;
	until.tv_sec += until.tv_nsec / 1000000000L;
	until.tv_nsec %= 1000000000L;
	/* signals interrupt the sleep: the calibration still needs its time */
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL))
		;
	tsc_raw_pair(&t1, &n1);
	return (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
}
#else
static double tsc_calibrate(unsigned int ms)
{
	(void)ms;
	return 0;
}
#endif

/* ---- output ---------------------------------------------------------- */

static void out_flush(struct out *o)
{
	size_t done = 0;

	while (done < o->len) {
		ssize_t n = write(1, o->buf + done, o->len - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "irqgap: writing output: %s\n",
				strerror(errno));
			exit(3);
		}
		done += n;
	}
	o->len = 0;
}

static void out_put(struct out *o, const char *s, size_t n)
{
	while (n) {
		size_t room = OUT_CAP - o->len, k = n < room ? n : room;

		memcpy(o->buf + o->len, s, k);
		o->len += k;
		s += k;
		n -= k;
		if (o->len == OUT_CAP)
			out_flush(o);
	}
}

static void out_str(struct out *o, const char *s)
{
	out_put(o, s, strlen(s));
}

static void out_ch(struct out *o, char c)
{
	out_put(o, &c, 1);
}

/* Hand-rolled: no locale, no varargs, in the bookkeeping window. */
static void out_u64(struct out *o, uint64_t v)
{
	char tmp[24];
	int i = sizeof(tmp);

	do {
		tmp[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	out_put(o, tmp + i, sizeof(tmp) - i);
}

static void out_kv(struct out *o, const char *key, uint64_t v)
{
	out_str(o, key);
	out_ch(o, ' ');
	out_u64(o, v);
	out_ch(o, '\n');
}

static void out_hz(struct out *o, const char *key, double hz)
{
	char tmp[64];

	snprintf(tmp, sizeof(tmp), "%s %.1f\n", key, hz);
	out_str(o, tmp);
}

/* ---- /proc counts ---------------------------------------------------- */

/* The whole file, from offset 0: seq_file restarts there. */
static size_t proc_read(struct counts *c)
{
	size_t len = 0;

	while (len < c->cap) {
		ssize_t n = pread(c->fd, c->buf + len, c->cap - len, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return 0;
		}
		if (n == 0)
			break;
		len += n;
	}
	return len;
}

static const char *skip_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

static uint64_t fnv1a(const char *p, const char *end)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	while (p < end)
		h = (h ^ (unsigned char)*p++) * 0x100000001b3ULL;
	return h;
}

/*
 * Column of "CPU<cpu>" in the header (CPUs offline have no column) and the
 * number of columns; -1 when the CPU is not listed.
 */
static int header_column(const char *p, const char *eol, int cpu, int *ncols)
{
	int col = -1, i = 0;

	for (;;) {
		const char *tok;

		p = skip_ws(p, eol);
		if (p == eol)
			break;
		tok = p;
		while (p < eol && *p != ' ' && *p != '\t')
			p++;
		if (p - tok > 3 && !strncmp(tok, "CPU", 3)) {
			char *end;
			long n = strtol(tok + 3, &end, 10);

			if (end == p && n == cpu)
				col = i;
		}
		i++;
	}
	*ncols = i;
	return col;
}

static struct row *find_row(struct counts *c, const char *label, size_t len)
{
	if (c->hint < c->nrows) {
		struct row *r = &c->rows[c->hint];

		if (!r->retired && !strncmp(r->label, label, len) &&
		    !r->label[len])
			return r;
	}
	for (int i = 0; i < c->nrows; i++) {
		struct row *r = &c->rows[i];

		if (!r->retired && !strncmp(r->label, label, len) &&
		    !r->label[len])
			return r;
	}
	return NULL;
}

/* A row seen for the first time: declared before any gap line uses it. */
static struct row *new_row(struct counts *c, struct out *o, const char *label,
			   size_t len, const char *desc, const char *dend)
{
	struct row *r;

	if (c->nrows == c->maxrows)
		return NULL;	/* table full: such a late row goes uncounted */
	r = &c->rows[c->nrows];
	memcpy(r->label, label, len);
	r->label[len] = '\0';
	r->last = 0;
	r->desc_hash = fnv1a(desc, dend);
	r->seen_gen = 0;
	r->retired = false;
	out_str(o, c->kind);
	out_ch(o, ' ');
	out_u64(o, c->nrows);
	out_ch(o, ' ');
	out_put(o, label, len);
	if (c->with_desc && dend > desc) {
		out_ch(o, ' ');
		out_put(o, desc, dend - desc);
	}
	out_ch(o, '\n');
	c->nrows++;
	return r;
}

/*
 * Re-read the file and note the rows whose count moved for our CPU since the
 * previous snapshot. New rows are declared on o. Counts are unsigned int in
 * the kernel: they wrap at 2^32.
 */
static void counts_snapshot(struct counts *c, struct out *o, int cpu)
{
	size_t len = proc_read(c);
	const char *p = c->buf, *end = c->buf + len, *eol;
	unsigned int prev_gen;
	int col, ncols;

	c->nmoved = 0;
	eol = memchr(p, '\n', end - p);
	if (!eol)
		return;
	col = header_column(p, eol, cpu, &ncols);
	if (col < 0)
		return;	/* CPU offline, or a bad read: keep the last counts */
	prev_gen = c->gen++;
	c->hint = 0;
	/* a line cut by a full buffer has no '\n' and is left out */
	for (p = eol + 1; p < end && (eol = memchr(p, '\n', end - p));
	     p = eol + 1) {
		const char *label, *colon, *q, *desc, *dend;
		uint64_t cur = 0, delta;
		struct row *r;
		size_t llen;
		int i;

		label = skip_ws(p, eol);
		colon = memchr(label, ':', eol - label);
		if (!colon)
			continue;
		llen = colon - label;
		if (!llen || llen >= LABEL_MAX)
			continue;
		q = colon + 1;
		for (i = 0; i < ncols; i++) {
			uint64_t v = 0;

			q = skip_ws(q, eol);
			if (q == eol || !isdigit((unsigned char)*q))
				break;
			while (q < eol && isdigit((unsigned char)*q))
				v = v * 10 + (*q++ - '0');
			if (i == col)
				cur = v;
		}
		if (i < ncols)
			continue;	/* ERR, MIS: one global count */
		desc = skip_ws(q, eol);
		dend = eol;
		while (dend > desc && (dend[-1] == ' ' || dend[-1] == '\t'))
			dend--;

		r = find_row(c, label, llen);
		if (r && r->seen_gen != prev_gen &&
		    r->desc_hash != fnv1a(desc, dend)) {
			/* gone and back as another device: a new row */
			r->retired = true;
			r = NULL;
		}
		if (!r) {
			r = new_row(c, o, label, llen, desc, dend);
			if (!r)
				continue;
		}
		if (r->seen_gen != prev_gen)
			delta = cur;	/* not there last time */
		else if (cur >= r->last)
			delta = cur - r->last;
		else if (r->last - cur > (1ULL << 31))
			delta = cur + (1ULL << 32) - r->last;
		else
			delta = cur;	/* restarted: freed and requested */
		r->last = cur;
		r->seen_gen = c->gen;
		c->hint = (int)(r - c->rows) + 1;
		if (delta) {
			c->moved[c->nmoved] = (int)(r - c->rows);
			c->delta[c->nmoved++] = delta;
		}
	}
}

static void counts_open(struct counts *c, struct out *o, int cpu)
{
	size_t len;

	c->fd = open(c->path, O_RDONLY | O_CLOEXEC);
	if (c->fd < 0)
		die("%s: %s", c->path, strerror(errno));
	/* big enough for the file as it is, with room for it to grow */
	c->cap = 64 * 1024;
	for (;;) {
		c->buf = realloc(c->buf, c->cap);
		if (!c->buf)
			die("out of memory");
		len = proc_read(c);
		if (len < c->cap)
			break;
		c->cap *= 2;
	}
	/* rows registered later need room: no allocation in the loop */
	for (const char *p = c->buf; (p = memchr(p, '\n', c->buf + len - p));
	     p++)
		c->maxrows += 4;
	if (c->cap < 4 * len)
		c->cap = 4 * len;
	if (c->cap < PROC_MIN_CAP)
		c->cap = PROC_MIN_CAP;
	c->buf = realloc(c->buf, c->cap);
	if (!c->buf)
		die("out of memory");
	memset(c->buf, 0, c->cap);	/* prefault */
	if (c->maxrows < MIN_ROWS)
		c->maxrows = MIN_ROWS;
	c->rows = calloc(c->maxrows, sizeof(*c->rows));
	c->moved = calloc(c->maxrows, sizeof(*c->moved));
	c->delta = calloc(c->maxrows, sizeof(*c->delta));
	if (!c->rows || !c->moved || !c->delta)
		die("out of memory");
	c->gen = 1;
	counts_snapshot(c, o, cpu);	/* baseline; declares the rows */
}

static void out_moved(struct out *o, const struct counts *c, bool on)
{
	if (!on || !c->nmoved) {
		out_ch(o, '-');
		return;
	}
	for (int i = 0; i < c->nmoved; i++) {
		if (i)
			out_ch(o, ',');
		out_u64(o, c->moved[i]);
		out_ch(o, ':');
		out_u64(o, c->delta[i]);
	}
}

/* ---- snapshots ------------------------------------------------------- */

static uint64_t ctxsw_now(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_THREAD, &ru))
		return 0;
	return (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
}

static bool smi_read(int fd, uint64_t *v)
{
	uint64_t msr;

	if (pread(fd, &msr, sizeof(msr), MSR_SMI_COUNT) != sizeof(msr))
		return false;
	*v = msr & 0xffffffffULL;	/* bits 31:0 count SMIs */
	return true;
}

static void smi_open(struct state *st, const char *path)
{
	char reason[512];

	errno = 0;
	st->msr_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (st->msr_fd < 0) {
		snprintf(reason, sizeof(reason), "open %s: %s", path,
			 strerror(errno));
	} else if (!smi_read(st->msr_fd, &st->last_smi)) {
		snprintf(reason, sizeof(reason),
			 "read MSR 0x34 from %s: %s", path,
			 errno ? strerror(errno) : "short read");
		close(st->msr_fd);
		st->msr_fd = -1;
	} else {
		out_str(&st->out, "smi available\n");
		return;
	}
	out_str(&st->out, "smi unavailable ");
	out_str(&st->out, reason);
	out_ch(&st->out, '\n');
}

static inline uint64_t ticks_to_ns(const struct state *st, uint64_t t)
{
	return st->tsc ? (uint64_t)((double)t * st->ns_per_tick + 0.5) : t;
}

/* @end_ns: CLOCK_MONOTONIC at the gap's end (the loop's own read, when it reads that clock) */
static void on_gap(struct state *st, uint64_t d, uint64_t end_ns)
{
	uint64_t cs = ctxsw_now(), smi = 0, smi_delta = 0;
	struct out *o = &st->out;
	bool smi_ok = false;

	if (st->msr_fd >= 0 && smi_read(st->msr_fd, &smi)) {
		smi_ok = true;
		smi_delta = (smi - st->last_smi) & 0xffffffffULL;
		st->last_smi = smi;
	}
	if (st->o.counts) {
		counts_snapshot(&st->irqs, o, st->o.cpu);
		counts_snapshot(&st->softirqs, o, st->o.cpu);
	}
	st->gaps++;
	out_str(o, "gap ");
	out_u64(o, end_ns);
	out_ch(o, ' ');
	out_u64(o, ticks_to_ns(st, d));
	out_ch(o, ' ');
	out_u64(o, cs - st->last_ctxsw);
	st->last_ctxsw = cs;
	out_ch(o, ' ');
	if (st->msr_fd >= 0 && smi_ok)
		out_u64(o, smi_delta);
	else
		out_ch(o, '-');
	out_ch(o, ' ');
	out_moved(o, &st->irqs, st->o.counts);
	out_ch(o, ' ');
	out_moved(o, &st->softirqs, st->o.counts);
	out_ch(o, '\n');
	if (o->len >= OUT_FLUSH_AT)
		out_flush(o);
}

/*
 * Bookkeeping that itself took longer than the threshold: the CPU was taken
 * while the loop did not watch (a disturbance that began right after a gap,
 * or a blocked write of the output). Said, not lost: its length is an upper
 * bound of the disturbance (the bookkeeping's own time is inside it).
 */
static void on_blind(struct state *st, uint64_t d, uint64_t end_ns)
{
	struct out *o = &st->out;

	out_str(o, "blind ");
	out_u64(o, end_ns);
	out_ch(o, ' ');
	out_u64(o, ticks_to_ns(st, d));
	out_ch(o, '\n');
	if (o->len >= OUT_FLUSH_AT)
		out_flush(o);
}

/*
 * CLOCK_MONOTONIC at counter reading t, a moment already past: the clock read
 * now, less the counter's time since t. Reading the clock after t is not
 * enough: the CPU may be taken between the two reads (an interrupt, or under
 * QEMU the other vCPU's turn: 100 us and more was seen), which would move a
 * gap's end, and its start with it, late by as much. The clock is bracketed
 * by two counter reads, the tightest of three brackets kept.
 */
static uint64_t mono_at(const struct state *st, uint64_t t)
{
	uint64_t best = UINT64_MAX, mono = 0, mid = t;

	for (int i = 0; i < 3; i++) {
		uint64_t a = read_counter();
		uint64_t m = clock_ns(CLOCK_MONOTONIC);
		uint64_t b = read_counter();

		if (b - a < best) {
			best = b - a;
			mono = m;
			mid = a + (b - a) / 2;
		}
	}
	return mono - ticks_to_ns(st, mid - t);
}

/*
 * Bookkeeping began at t0: add it to the blind time, say it if it outlasted
 * the threshold, and return the time the loop watches from again. Saying it
 * is bookkeeping too: the loop goes on from the span's end, so the CPU taken
 * while a blind line is written is found (another blind line), never lost.
 * With the monotonic clock a span's end is the read that ended it: a later
 * read, after an interrupt, would move the whole span late.
 */
static uint64_t watch_again(struct state *st, const bool tsc, uint64_t t0)
{
	uint64_t t = now_ticks(tsc);

	st->blind_ticks += t - t0;
	while (unlikely(t - t0 > st->thr_ticks)) {
		on_blind(st, t - t0, tsc ? mono_at(st, t) : t);
		t0 = t;
		t = now_ticks(tsc);
		st->blind_ticks += t - t0;
	}
	return t;
}

static void on_tick(struct state *st)
{
	struct out *o = &st->out;

	out_str(o, "tick ");
	out_u64(o, clock_ns(CLOCK_MONOTONIC));
	out_ch(o, ' ');
	out_u64(o, st->iterations);
	out_ch(o, ' ');
	out_u64(o, st->gaps);
	out_ch(o, '\n');
	out_flush(o);
	/*
	 * New baselines: a gap's deltas then cover the time since the last
	 * gap or tick, not every interrupt since the previous gap however
	 * long ago (with a threshold above a tick's cost, gaps are rare).
	 */
	st->last_ctxsw = ctxsw_now();
	if (st->msr_fd >= 0)
		smi_read(st->msr_fd, &st->last_smi);
	if (st->o.counts) {
		counts_snapshot(&st->irqs, o, st->o.cpu);
		counts_snapshot(&st->softirqs, o, st->o.cpu);
	}
}

/*
 * The loop (inline: with tsc a constant at each call, the compiler may give
 * each clock a branch-free body). The time
 * spent in bookkeeping (after a gap, at a tick) is not a gap: prev is reset
 * after it, and it is added to the blind time instead.
 */
static inline bool spin(struct state *st, const bool tsc, uint64_t *min_loop)
{
	uint64_t prev = now_ticks(tsc), t, d, mn = UINT64_MAX;
	uint64_t next = st->flush_at < st->deadline ? st->flush_at
						     : st->deadline;
	const uint64_t thr = st->thr_ticks;
	uint64_t iters = 0;
	bool timed_out = false;

	for (;;) {
		t = now_ticks(tsc);
		d = t - prev;
		iters++;
		if (unlikely(d > thr)) {
			uint64_t t0 = t;

			st->iterations = iters;
			/* t is the end: with the monotonic clock itself, with a counter placed on that clock */
			on_gap(st, d, tsc ? mono_at(st, t) : t);
			t = watch_again(st, tsc, t0);
		} else if (d < mn) {
			mn = d;
		}
		/* after the gap check: a gap that ends in a signal is kept */
		if (unlikely(atomic_load_explicit(&stop, memory_order_relaxed)))
			break;
		if (unlikely(t >= next)) {
			uint64_t t0 = t;

			if (t >= st->deadline) {
				timed_out = true;
				break;
			}
			st->iterations = iters;
			on_tick(st);
			t = watch_again(st, tsc, t0);
			st->flush_at = t + st->flush_ticks;
			next = st->flush_at < st->deadline ? st->flush_at
							   : st->deadline;
		}
		prev = t;
	}
	st->iterations = iters;
	st->watched_until = t;
	*min_loop = mn;
	return timed_out;
}

static bool spin_tsc(struct state *st, uint64_t *min_loop)
{
	return spin(st, true, min_loop);
}

static bool spin_mono(struct state *st, uint64_t *min_loop)
{
	return spin(st, false, min_loop);
}

/* ---- setup ----------------------------------------------------------- */

static void setup_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	/* no SA_RESTART: a blocked write returns and is retried */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	/* a vanished reader shows as EPIPE from write, exit 3 */
	signal(SIGPIPE, SIG_IGN);
}

static void setup_sched(const struct opts *o)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(o->cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		die("--cpu %d: sched_setaffinity: %s", o->cpu,
		    strerror(errno));
	if (o->mlock && mlockall(MCL_CURRENT | MCL_FUTURE))
		die("mlockall: %s (--no-mlock to run without)",
		    strerror(errno));
	if (o->priority) {
		struct sched_param sp = { .sched_priority = o->priority };

		if (sched_setscheduler(0, SCHED_FIFO, &sp))
			die("--priority %d: sched_setscheduler(SCHED_FIFO): %s",
			    o->priority, strerror(errno));
	}
}

int main(int argc, char **argv)
{
	static struct state st;
	char msr_path[64];
	uint64_t min_loop, start_ticks;
	bool timed_out;

	parse_opts(argc, argv, &st.o);
	setup_signals();
	setup_sched(&st.o);

	st.tsc = st.o.clock == CLOCK_COUNTER ||
		 (st.o.clock == CLOCK_AUTO && tsc_invariant());

	st.out.buf = malloc(OUT_CAP);
	if (!st.out.buf)
		die("out of memory");
	memset(st.out.buf, 0, OUT_CAP);	/* prefault (locked with mlock) */

	st.irqs = (struct counts){ .path = st.o.interrupts, .kind = "irq",
				   .with_desc = true, .fd = -1 };
	st.softirqs = (struct counts){ .path = st.o.softirqs,
				       .kind = "softirq", .fd = -1 };

	out_kv(&st.out, "irqgap", FORMAT_VERSION);
	out_str(&st.out, "arch " ARCH_NAME "\n");
	out_str(&st.out, st.tsc ? "clock " COUNTER_NAME "\n" : "clock monotonic\n");
	if (st.tsc) {
		st.tsc_hz = tsc_calibrate(200);
		if (!(st.tsc_hz > 0))
			die("--clock %s: calibration failed", COUNTER_NAME);
		out_hz(&st.out, COUNTER_NAME "_hz", st.tsc_hz);
#if defined(__aarch64__)
		out_hz(&st.out, "cntfrq_hz", (double)counter_frequency());
#endif
		st.ns_per_tick = 1e9 / st.tsc_hz;
		st.thr_ticks = (uint64_t)((double)st.o.threshold_ns *
					  st.tsc_hz / 1e9);
		st.flush_ticks = (uint64_t)((double)st.o.flush_ms *
					    st.tsc_hz / 1e3);
	} else {
		st.thr_ticks = st.o.threshold_ns;
		st.flush_ticks = st.o.flush_ms * 1000000ULL;
	}
	out_kv(&st.out, "cpu", st.o.cpu);
	out_kv(&st.out, "threshold_ns", st.o.threshold_ns);
	out_kv(&st.out, "priority", st.o.priority);
	if (!st.o.msr_dev) {
		snprintf(msr_path, sizeof(msr_path), "/dev/cpu/%d/msr",
			 st.o.cpu);
		st.o.msr_dev = msr_path;
	}
	if (!HAVE_SMI) {
		/* SMIs are x86's: elsewhere firmware's time (arm64: TrustZone, SDEI) has no counter */
		st.msr_fd = -1;
		out_str(&st.out, "smi unavailable no SMI on " ARCH_NAME "\n");
	} else if (st.o.smi) {
		smi_open(&st, st.o.msr_dev);
	} else {
		st.msr_fd = -1;
		out_str(&st.out, "smi unavailable disabled by --no-smi\n");
	}

	/* baselines, as close to the loop's start as can be */
	if (st.o.counts) {
		counts_open(&st.softirqs, &st.out, st.o.cpu);
		counts_open(&st.irqs, &st.out, st.o.cpu);
	}
	st.last_ctxsw = ctxsw_now();
	start_ticks = now_ticks(st.tsc);
	out_kv(&st.out, "start", clock_ns(CLOCK_MONOTONIC));
	out_flush(&st.out);
	/* writing the header is the first bookkeeping: the CPU taken then is said too */
	start_ticks = watch_again(&st, st.tsc, start_ticks);
	st.flush_at = start_ticks + st.flush_ticks;
	st.deadline = UINT64_MAX;
	if (st.o.duration_s) {
		double ticks = st.tsc ? (double)st.o.duration_s * st.tsc_hz
				      : (double)st.o.duration_s * 1e9;

		st.deadline = start_ticks + (uint64_t)ticks;
	}
	timed_out = st.tsc ? spin_tsc(&st, &min_loop)
			   : spin_mono(&st, &min_loop);

	/*
	 * The end is the last moment watched: with the monotonic clock the
	 * loop's own last read (an interrupt before a later read would put
	 * time nobody watched inside the run).
	 */
	out_str(&st.out, "end ");
	out_u64(&st.out, st.tsc ? clock_ns(CLOCK_MONOTONIC) : st.watched_until);
	out_ch(&st.out, ' ');
	out_u64(&st.out, st.iterations);
	out_ch(&st.out, ' ');
	out_u64(&st.out, st.gaps);
	out_ch(&st.out, ' ');
	out_u64(&st.out, ticks_to_ns(&st, st.blind_ticks));
	out_ch(&st.out, ' ');
	out_u64(&st.out, min_loop == UINT64_MAX ? 0
						: ticks_to_ns(&st, min_loop));
	out_str(&st.out, timed_out ? " duration\n" : " signal\n");
	out_flush(&st.out);
	if (st.tsc) {
		/* a drift from the rate before shows the counter did not hold it */
		out_hz(&st.out, COUNTER_NAME "_hz_end", tsc_calibrate(100));
		out_flush(&st.out);
	}
	return 0;
}
