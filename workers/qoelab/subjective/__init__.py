"""Subjective scores analysed outside the lab's campaigns (no Django): votes, subject models, reports.

``votes`` reads a rating set (long CSV or P.910's matrix layout) and says what is wrong with a bad
one; ``models`` estimates each stimulus' score with a plain mean, ITU-T P.910 Appendix VI's
alternating projection or the maximum-likelihood subject model of ITU-T P.913 clause 12.6 (each
rater's bias and inconsistency estimated with it); ``report`` turns a fit into JSON or Markdown.
See docs/ratings.md, "Subject models".
"""
