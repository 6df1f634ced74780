"""Postmortems drafted from facts: the template (`template.py`), the impact figures with their
queries (`figures.py`), and the draft's sections (`draft.py`). Writes go through
`incidents/services/postmortems.py`."""
