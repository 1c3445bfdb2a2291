"""Rank statistics the planner benchmarks share (imported by planner_accuracy.sh and
planner_rescore.sh through PYTHONPATH=bench).

    spearman([1.0, 2.0, 3.0], [10.0, 30.0, 20.0])  # 0.5
"""
import statistics


def ranks_of(xs):
    """0-based ranks; ties share the mean of their positions."""
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    r = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def spearman(x, y):
    """Spearman's rank correlation of two equally long sequences (nan when one is constant)."""
    rx, ry = ranks_of(x), ranks_of(y)
    mx, my = statistics.mean(rx), statistics.mean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    den = (sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry)) ** 0.5
    return num / den if den else float("nan")
