/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Standard PC parallel port registers (offsets from the I/O base), as the
 * LPT latency modules (lpt_latency, rtai_lpt_latency) drive them.
 */
#ifndef LPT_REGS_H
#define LPT_REGS_H

#define LPT_DATA(b)		(b)
#define LPT_STATUS(b)		((b) + 1)
#define LPT_CONTROL(b)		((b) + 2)
#define LPT_NPORTS		3
#define LPT_STATUS_ACK		0x40	/* level of pin 10, not inverted */
#define LPT_CONTROL_STROBE	0x01	/* nStrobe, inverted */
#define LPT_CONTROL_INIT	0x04	/* nInit, not inverted */
#define LPT_CONTROL_SELECT	0x08	/* nSelectIn, inverted */
#define LPT_CONTROL_IRQEN	0x10	/* IRQ on the rising edge of nACK */

#endif /* LPT_REGS_H */
