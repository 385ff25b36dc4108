// SPDX-License-Identifier: GPL-2.0
/*
 * Seed 002's experiment the way the seed wrote it: an Arduino sketch on the
 * Arduino core. attachInterrupt() on digital pin 2 (INT0, rising edge), and
 * digitalWrite() of digital pin 7 in the handler, which toggles it on every
 * edge. MASK_TIMER0=1 clears timer0's overflow interrupt enable (TOIE0) once
 * the core has set it up: the seed's "timer off" measurement (millis() then
 * stops; nothing here uses it).
 *
 * Built by ../Makefile (target "sketch") against Debian's arduino-core-avr,
 * with the compiler flags of the Arduino IDE of the seed's time (1.6.x,
 * before link-time optimisation was switched on in 1.6.10).
 */
#include <Arduino.h>

#ifndef MASK_TIMER0
#define MASK_TIMER0 0
#endif

static const uint8_t IN_PIN = 2;
static const uint8_t OUT_PIN = 7;
static volatile uint8_t level = LOW;

static void on_edge(void)
{
	level = !level;
	digitalWrite(OUT_PIN, level);
}

void setup(void)
{
	pinMode(IN_PIN, INPUT);
	pinMode(OUT_PIN, OUTPUT);
	attachInterrupt(digitalPinToInterrupt(IN_PIN), on_edge, RISING);
#if MASK_TIMER0
	TIMSK0 &= ~_BV(TOIE0);
#endif
}

void loop(void)
{
}
