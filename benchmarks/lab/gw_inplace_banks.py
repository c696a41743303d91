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


def box_rows(slice_):
    """The batch rows (of a 16-row block) a permuted 8-row box puts at shared rows 0-7: its dims
    s0 (2 x 2 rows), s1 (2 x 8 rows), s2 (2 x 1 row) in that order, at row 4 slice_ of the block."""
    return [2 * s0 + 8 * s1 + s2 + 4 * slice_ for s2 in range(2) for s1 in range(2) for s0 in range(2)]


def fragments_agree():
    """Whether the permuted box and the fragment addressing give every thread, for both K slices of
    a block, A[m][k] = x[the row go^T holds at K position k][m], for a = (m, t), (m + 8, t),
    (m, t + 4), (m + 8, t + 4) with m = 16 w + g: the box laid out as the copy engine would
    (128-byte swizzle), then read back word by word at the addresses the kernel would use."""
    for slice_ in range(2):
        rows = box_rows(slice_)
        smem = {}
        for half in range(2):  # two 1 KB boxes: columns [0, 32) and [32, 64)
            for S, R in enumerate(rows):
                for col in range(32):
                    # (R, column) stands for the value x[R][column]
                    smem[half * 1024 + address(S, col)] = (R, 32 * half + col)
        for w in range(4):
            for lane in range(32):
                g, t = divmod(lane, 4)
                for frag in range(4):
                    m = 16 * w + g + (8 if frag % 2 else 0)
                    k = t + (4 if frag >= 2 else 0)
                    S = 2 * (k % 4) + k // 4  # the kernel's row of K position k
                    got = smem[(m // 32) * 1024 + address(S, m)]
                    if got != (got_row(8 * slice_ + k), m):
                        return False
    return True


if __name__ == "__main__":
    for name, row_of in ORDERS.items():
        print(f"{name}: {ways(row_of)}-way")
    print("permuted box: fragments hold go^T's rows:", "yes" if fragments_agree() else "NO")
