/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * irqs_record.h - the one definition of the irq-station record stream.
 *
 * Two formats travel from a latency module to the station:
 *
 *  legacy  one little-endian int64 per event: the software-measured latency
 *          in nanoseconds, exactly what the 2015 RTAI modules wrote to their
 *          RT FIFO.  No sequence number, so losses cannot be seen.
 *
 *  v1      struct irqs_record_v1 below: fixed size (40 bytes), little-endian,
 *          naturally aligned, no padding.  Every event gets the next sequence
 *          number whether or not its record reaches the reader, so a gap in
 *          seq is a loss; `dropped` says how many of those losses were the
 *          module's buffer being full.
 *
 * The Python decoder (station/records.py) and the twin follow this header;
 * tests/test_records_c.py compiles a writer from it and checks the decoder.
 * Change the layout only together with IRQS_RECORD_VERSION.
 */
#ifndef IRQS_RECORD_H
#define IRQS_RECORD_H

#ifdef __KERNEL__
#include <linux/types.h>
typedef __u16 irqs_u16;
typedef __u32 irqs_u32;
typedef __u64 irqs_u64;
typedef __s64 irqs_s64;
#else
#include <stdint.h>
typedef uint16_t irqs_u16;
typedef uint32_t irqs_u32;
typedef uint64_t irqs_u64;
typedef int64_t irqs_s64;
#endif

/* "IRQ1" read as a little-endian u32: lets a reader find record boundaries. */
#define IRQS_RECORD_MAGIC	0x31515249u
#define IRQS_RECORD_VERSION	1
#define IRQS_RECORD_SIZE	40

/* flags */
#define IRQS_F_CHECK		0x0001u	/* "inb" variant: ownership checked before clearing */
#define IRQS_F_NOT_OURS		0x0002u	/* handler ran but the device said the IRQ was not its own */
#define IRQS_F_HW_WIDTH		0x0004u	/* hw_width_ns holds the board-measured pulse width */
#define IRQS_F_OVERRUN		0x0008u	/* the timer fired while the previous IRQ was still pending */
#define IRQS_F_HELD		0x0010u	/* test_hold_us: the handler waited before its timestamp (a test) */
#define IRQS_F_OFF_CPU		0x0020u	/* cpu=N pinned the IRQ, but the kernel took this one on another CPU */
#define IRQS_F_IFACE_SHIFT	8
#define IRQS_F_IFACE_MASK	0x0f00u	/* interface, see IRQS_IFACE_* */

#define IRQS_IFACE_UNKNOWN	0
#define IRQS_IFACE_LPT		1
#define IRQS_IFACE_PCIE		2

struct irqs_record_v1 {
	irqs_u32 magic;		/*  0: IRQS_RECORD_MAGIC */
	irqs_u16 version;	/*  4: IRQS_RECORD_VERSION */
	irqs_u16 flags;		/*  6: IRQS_F_* */
	irqs_u64 seq;		/*  8: event number since module load, from 0 */
	irqs_u64 t_write_ns;	/* 16: target clock, timestamp taken just before the bus write */
	irqs_s64 latency_ns;	/* 24: handler-entry timestamp minus t_write_ns (t_SW) */
	irqs_u32 hw_width_ns;	/* 32: board-measured width if IRQS_F_HW_WIDTH, else 0 */
	irqs_u32 dropped;	/* 36: records dropped on a full buffer since load (cumulative) */
};

/*
 * The size check is the compiler's, not the kernel's: <linux/build_bug.h> came
 * with Linux 4.13 and the one-argument static_assert() with 5.1, while the
 * RTAI modules build on 3.x kernels (RTAI 3.9 on 3.4.55).  _Static_assert is
 * gcc's from 4.6 in every -std mode; before it, an array of negative size.
 */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L || \
	defined(__GNUC__) && (__GNUC__ > 4 || (__GNUC__ == 4 && __GNUC_MINOR__ >= 6))
_Static_assert(sizeof(struct irqs_record_v1) == IRQS_RECORD_SIZE, "record size");
#else
extern char irqs_record_v1_size_check[sizeof(struct irqs_record_v1) == IRQS_RECORD_SIZE ? 1 : -1];
#endif

#endif /* IRQS_RECORD_H */
