#!/usr/bin/env python3
"""A CPU-bound neighbour for bench/dp.sh's loaded mode: one thread of integer arithmetic from a
fixed seed, forever (the bench kills it), the same for every side it runs beside."""
import random
import sys

random.seed(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
x = random.getrandbits(31)
while True:
    for _ in range(1_000_000):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
