"""``make bench``: every benchmark of the project, each figure measured beside its comparison.

Each area has a module ``bench/bench_<area>.py`` with ``def run(quick: bool) -> list[Row]``
(sync; it may call ``anyio.run`` itself). ``python -m bench`` runs them all, prints one
table, and writes ``bench/results/bench.json`` and ``bench/results/bench.png``.
"""
