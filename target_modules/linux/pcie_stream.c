// SPDX-License-Identifier: GPL-2.0
/*
 * pcie_latency's own copy of the record stream. Kbuild (since 6.2) warns when
 * one object is linked into several modules, so each module compiles
 * irqs_stream.c under its own object name.
 */
#include "irqs_stream.c"
