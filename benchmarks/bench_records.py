"""Record decoding speed: the streaming V1Decoder (64 KiB chunks, as bytes
arrive over SSH, with loss accounting) against the floor measured in the same
run — one np.frombuffer over the whole buffer. Prints the ratio and the
decoder's headroom over the fastest stream a module produces (10 µs period).

    .venv/bin/python benchmarks/bench_records.py
"""

from __future__ import annotations

import time

import numpy as np

from station.parsers import records

N = 1_000_000
CHUNK = 1 << 16


def best_of(fn, repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    rng = np.random.default_rng(1)
    data = records.encode_v1(np.arange(N), np.arange(N) * 100_000, rng.integers(4000, 20000, N), 0x0101)
    chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]

    def streaming() -> None:
        dec = records.V1Decoder()
        for c in chunks:
            dec.feed(c)
        assert dec.records == N and dec.losses.lost == 0

    def floor() -> None:
        np.frombuffer(data, dtype=records.V1_DTYPE)["latency_ns"].copy()

    t_stream, t_floor = best_of(streaming), best_of(floor)
    rate = N / t_stream
    print(f"records: {N}, chunk: {CHUNK} B")
    print(f"baseline np.frombuffer: {t_floor * 1e3:8.2f} ms")
    print(f"V1Decoder streaming:    {t_stream * 1e3:8.2f} ms  ratio {t_stream / t_floor:6.1f}x baseline")
    print(f"decoder rate: {rate / 1e6:.2f} M records/s = {rate / 100_000:.0f}x a 10 µs-period module's stream")


if __name__ == "__main__":
    main()
