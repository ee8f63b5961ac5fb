"""Print the ``hbm`` cost term as XLA's own cost model gives it: per shipped compiled
step, the share of a device's HBM bandwidth at which XLA's estimates stream its
elementwise fusions, and their median (tpusim/validation/xla_streaming.py).

Run: ``python tools/xla_hbm_share.py`` (about a minute: it parses the 12 programs).
"""

from __future__ import annotations

from tpusim.validation.xla_streaming import derived_hbm_share, streaming_shares


def main() -> None:
    shares = streaming_shares()
    print(f"{'case':34s} {'chip':9s} {'ops':>6s} {'GB':>8s} {'XLA s':>8s} {'share':>6s}")
    for s in shares:
        gb = s.bytes / 1e9
        print(f"{s.case:34s} {s.chip:9s} {s.ops:6d} {gb:8.1f} {s.xla_s:8.3f} {s.share:6.3f}")
    print(f"median share (the hbm term): {derived_hbm_share(shares):.3f}")


if __name__ == "__main__":
    main()
