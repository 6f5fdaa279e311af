"""Storage APT (thesis 000 ch. 2, paper 003): parallel IP-SAN sessions tuned by APT.

``controller`` is the algorithm (bracket search, then golden-section search) with every point the
papers leave open fixed as a parameter; ``cli`` adds ``qoelab apt simulate``, which runs it on a
goodput curve. docs/storage-apt.md.
"""
