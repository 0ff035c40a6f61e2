"""Evidence of a value, read the same way by recall and by consolidation: whether a question asks for a figure or a
date and an entry states one (figures.py), and whether a later entry states again the thing an earlier one said
(restated.py)."""
