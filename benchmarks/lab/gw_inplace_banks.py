"""Bank-conflict ways of gW's tf32 A-fragment loads from x's own rows, counted on the host
(NOTES_FCGP.md session 28; the GPU side is gw_inplace_lab.cu).

A tile of 64 N_in rows is stored as two halves of 32 columns in 128-byte rows under the 128-byte
swizzle (16-byte chunk c of shared row S at c ^ (S % 8)). Thread (g, t) of warp w loads, for K
slice s, rows m = 16 w + g (+ 8) at K positions 8 s + t (+ 4). Which shared row holds a position
is the order; the ways are the most distinct words any bank serves in one load.

    python benchmarks/lab/gw_inplace_banks.py
"""


def got_row(p):
    """The batch row that position p of a 16-position block holds in go^T (got_row)."""
    return p // 2 + 8 * (p % 2)


ORDERS = {
    "today: got_row positions on natural rows": lambda p: got_row(p % 16) + 16 * (p // 16),
    "natural positions on natural rows": lambda p: p,
    "permuted box: S % 8 = 2 (P % 4) + (P % 8) / 4": lambda p: 8 * (p // 8) + 2 * (p % 4) + (p % 8) // 4,
}


def address(row, m):
    m32 = m % 32
    return row * 128 + ((m32 // 4) ^ (row % 8)) * 16 + (m32 % 4) * 4


def ways(row_of):
    worst = 0
    for w in range(4):
        for s in range(2):
            for frag in range(4):  # a[0]: (m, t), a[1]: (m + 8, t), a[2]: (m, t + 4), a[3]: (m + 8, t + 4)
                banks = {}
                for lane in range(32):
                    g, t = divmod(lane, 4)
                    m = 16 * w + g + (8 if frag % 2 else 0)
                    a = address(row_of(8 * s + t + (4 if frag >= 2 else 0)), m)
                    banks.setdefault(a // 4 % 32, set()).add(a)
                worst = max(worst, max(len(v) for v in banks.values()))
    return worst


if __name__ == "__main__":
    for name, row_of in ORDERS.items():
        print(f"{name}: {ways(row_of)}-way")
