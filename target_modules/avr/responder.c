// SPDX-License-Identifier: GPL-2.0
/*
 * responder.c - GPIO interrupt responder for the ATmega328P (Arduino Uno),
 * seed 002: how fast does an AVR answer an edge on a pin, and what does the
 * Arduino core's timer0 interrupt do to that answer?
 *
 *   input   PD2 / INT0  = Uno digital pin 2   (rising edge → interrupt)
 *   output  PD7         = Uno digital pin 7   (toggled by the INT0 handler)
 *
 * The scope measures from the input's rising edge to the output's next edge
 * (either direction: the handler toggles, as the seed's sketch did).
 *
 * Timer0 runs exactly as the Arduino core sets it up (fast PWM, TOP 0xFF,
 * prescaler 64: an overflow every 64 * 256 = 16384 cycles, 976.5625 Hz at
 * 16 MHz) and, unless built with -DMASK_TIMER0=1, its overflow interrupt keeps
 * a millis()-like clock. While that handler runs, interrupts are disabled, so
 * an edge arriving then waits for the rest of it: the seed's outliers.
 * With MASK_TIMER0=1 the timer still counts (PWM on pins 5/6 would still
 * work) but TOIE0 stays clear: no overflow interrupt, no outliers.
 *
 * Plain avr-libc, no Arduino core. Build: see Makefile (avr-gcc
 * -mmcu=atmega328p -Os -DF_CPU=16000000UL). No simavr .mmcu section: the
 * harness names the MCU and clock itself, so this file builds and flashes
 * with nothing but gcc-avr and avr-libc.
 */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <stdint.h>

#ifndef F_CPU
#error "F_CPU must be defined (the Makefile passes -DF_CPU=16000000UL)"
#endif
#ifndef MASK_TIMER0
#define MASK_TIMER0 0
#endif

/*
 * Timer0 at F_CPU/64 overflows every 64 * 256 cycles: 1024 µs at 16 MHz.
 * The clock advances by whole milliseconds and carries the 24 µs remainder,
 * so it stays exact. These are our own constants, derived from F_CPU.
 */
#define OVF_CYCLES (64UL * 256UL)
#define OVF_US (OVF_CYCLES / (F_CPU / 1000000UL))	/* 1024 at 16 MHz */
#define OVF_WHOLE_MS (OVF_US / 1000U)			/* 1 */
#define OVF_REM_US (OVF_US % 1000U)			/* 24 */

/* volatile: main() (or a later sketch) reads them outside the handler */
static volatile uint32_t clock_ms;	/* milliseconds since start */
static volatile uint16_t clock_rem_us;	/* carried fraction, 0..999 µs */
static volatile uint32_t clock_overflows;	/* raw overflow count (micros()) */

/*
 * The overflow handler: the same kind of work as the Arduino core's (load
 * and store a 32-bit clock, a carried remainder and a 32-bit overflow count),
 * so that its length, the window in which it blocks INT0, is realistic:
 * 115-117 cycles from the vector jump to the end of reti with avr-gcc 5.4
 * -Os (the carry branch adds two), prologue and epilogue included.
 */
ISR(TIMER0_OVF_vect)
{
	uint32_t ms = clock_ms + OVF_WHOLE_MS;
	uint16_t rem = clock_rem_us + OVF_REM_US;

	if (rem >= 1000U) {
		rem -= 1000U;
		ms++;
	}
	clock_ms = ms;
	clock_rem_us = rem;
	clock_overflows++;
}

/*
 * The measured path. Writing a 1 to a PINx bit toggles PORTx on the
 * ATmega328P: a plain store of 0x80 (`ldi` + `out`), no read-modify-write of
 * PORTD. `PIND |= ...` would mean a read-modify-write in C, which would also
 * toggle PD2's pull-up while the input is high. An ordinary ISR (not
 * ISR_NAKED) so that the latency includes the usual avr-gcc prologue, as any
 * C handler's does: 13 cycles from the vector to the port write.
 */
ISR(INT0_vect)
{
	PIND = _BV(PIND7);
}

static void timer0_like_arduino(void)
{
	TCCR0A = _BV(WGM01) | _BV(WGM00);	/* fast PWM, TOP = 0xFF */
	TCCR0B = _BV(CS01) | _BV(CS00);		/* clk/64 */
#if MASK_TIMER0
	TIMSK0 = 0;				/* timer runs, overflow interrupt masked */
#else
	TIMSK0 = _BV(TOIE0);
#endif
}

int main(void)
{
	DDRD = _BV(DDD7);			/* PD7 output (low), PD2 input */
	PORTD = 0;				/* no pull-up on PD2: the generator drives it */
	EICRA = _BV(ISC01) | _BV(ISC00);	/* INT0 on the rising edge */
	EIFR = _BV(INTF0);			/* forget an edge seen during set-up */
	EIMSK = _BV(INT0);
	timer0_like_arduino();
	sei();

	/*
	 * Idle loop: a bare `rjmp .` (2 cycles), so an edge waits at most one
	 * cycle for the current instruction to finish; the loop of a real sketch
	 * would add its longest instruction (up to 5 cycles) to the spread.
	 * No sleep mode: waking from SLEEP_MODE_IDLE costs cycles of its own,
	 * and deeper modes stop the clock and add a start-up delay, which would
	 * be measured as response time.
	 */
	for (;;)
		;
}
